"""Seeded simulations that the chapters run (one module per chapter's experiment).

Each function takes its sizes and seed as arguments, calls the course's kernels for the formulas, and
returns plain numbers or tensors; the notebooks print and plot them, the tests pin them to the seeds'
printed figures.
"""
