"""Known-wrong: draws with replacement, 1 - (1 - c/n)^k."""
import torch

HINT = ("You draw with replacement: 1 - (1 - c/n)^k. The estimator draws k of the n answers without "
        "replacement, 1 - C(n - c, k) / C(n, k), which is higher for every k > 1 and reaches 1 once k > n - c.")


def pass_at_k(n, c, k):
    return 1.0 - (1.0 - c.double() / n.double()) ** k
