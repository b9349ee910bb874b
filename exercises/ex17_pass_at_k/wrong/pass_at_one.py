"""Known-wrong: c / n whatever k (pass@1)."""
import torch

HINT = ("Your result is the fraction of right answers, which is pass@1, whatever k is. Check how your "
        "estimate depends on k: what is the chance that k draws hold a right answer?")


def pass_at_k(n, c, k):
    return c.double() / n.double()
