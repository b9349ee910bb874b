"""Known-wrong: each binomial built up as a float, which overflows (inf / inf = nan) for large n."""
import torch

HINT = ("You form the binomials C(n - c, k) and C(n, k) as floats; at n = 2000, k = 1000 they exceed the "
        "largest float64 (inf / inf is nan). Use the product form, prod over i = n - c + 1 .. n of (1 - k / i).")


def _binom(n, k):
    b = 1.0
    for j in range(k):
        b *= (n - j) / (j + 1)
    return b


def pass_at_k(n, c, k):
    return torch.tensor([1.0 - _binom(int(ni) - int(ci), k) / _binom(int(ni), k)
                         for ni, ci in zip(n.tolist(), c.tolist())], dtype=torch.float64)
