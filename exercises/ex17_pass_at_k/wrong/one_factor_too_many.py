"""Known-wrong: the product runs from i = n - c instead of n - c + 1 (c + 1 factors)."""
import torch

HINT = ("Your product has c + 1 factors: it starts at i = n - c. C(n - c, k) / C(n, k) is the product over "
        "i = n - c + 1 .. n, exactly c factors (none when c = 0).")


def pass_at_k(n, c, k):
    out = []
    for ni, ci in zip(n.tolist(), c.tolist()):
        i = torch.arange(ni - ci, ni + 1, dtype=torch.float64)
        out.append(1.0 - torch.prod(1.0 - k / i))
    return torch.stack(out)
