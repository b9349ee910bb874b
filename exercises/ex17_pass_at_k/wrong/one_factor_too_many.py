"""Known-wrong: the product runs from i = n - c instead of n - c + 1 (c + 1 factors)."""
import torch

HINT = ("Your product has one factor too many: it starts one step early. Check the range of your product "
        "against the ratio of binomials it stands for: how many factors should it have for c right answers, "
        "and how many when c is 0?")


def pass_at_k(n, c, k):
    out = []
    for ni, ci in zip(n.tolist(), c.tolist()):
        i = torch.arange(ni - ci, ni + 1, dtype=torch.float64)
        out.append(1.0 - torch.prod(1.0 - k / i))
    return torch.stack(out)
