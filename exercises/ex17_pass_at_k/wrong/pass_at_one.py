"""Known-wrong: c / n whatever k (pass@1)."""
import torch

HINT = "You return c / n, which is pass@1. pass@k depends on k: the chance that k draws hold a right answer."


def pass_at_k(n, c, k):
    return c.double() / n.double()
