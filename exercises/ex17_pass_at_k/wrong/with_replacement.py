"""Known-wrong: draws with replacement, 1 - (1 - c/n)^k."""
import torch

HINT = ("You draw with replacement. Check how the estimator draws its k answers from the n: with or without "
        "replacement? Without, the estimate is higher for every k above 1 and reaches 1 once k exceeds the "
        "number of wrong answers.")


def pass_at_k(n, c, k):
    return 1.0 - (1.0 - c.double() / n.double()) ** k
