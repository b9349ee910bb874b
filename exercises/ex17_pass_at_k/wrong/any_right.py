"""Known-wrong: 1 whenever one answer of the n is right (pass@n, not pass@k)."""
import torch

HINT = ("You return 1 whenever any of the n answers is right: that is pass@n. With k < n a draw of k can "
        "miss the right ones; the chance it does is C(n - c, k) / C(n, k).")


def pass_at_k(n, c, k):
    return (c > 0).double()
