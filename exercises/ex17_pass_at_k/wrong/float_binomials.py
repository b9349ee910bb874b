"""Known-wrong: each binomial built up as a float, which overflows (inf / inf = nan) for large n."""
import torch

HINT = ("You form the binomials as floats; at n = 2000, k = 1000 they exceed the largest float64, and inf "
        "over inf is nan. Check whether your computation needs the binomials themselves: can their ratio be "
        "written so that no intermediate grows past 1?")


def _binom(n, k):
    b = 1.0
    for j in range(k):
        b *= (n - j) / (j + 1)
    return b


def pass_at_k(n, c, k):
    return torch.tensor([1.0 - _binom(int(ni) - int(ci), k) / _binom(int(ni), k)
                         for ni, ci in zip(n.tolist(), c.tolist())], dtype=torch.float64)
