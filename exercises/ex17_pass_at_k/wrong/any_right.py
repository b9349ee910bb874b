"""Known-wrong: 1 whenever one answer of the n is right (pass@n, not pass@k)."""
import torch

HINT = ("You return 1 whenever any of the n answers is right: that is pass@n. Check how your result depends "
        "on k: with k below n, can a draw of k miss the right ones, and how likely is that?")


def pass_at_k(n, c, k):
    return (c > 0).double()
