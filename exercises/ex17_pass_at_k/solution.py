"""The product form, one prompt at a time: 1 - prod over i = n-c+1 .. n of (1 - k / i), in float64.
A factor is 0 when i = k, which lands in the range exactly when n - c < k: the estimate is then 1 with
no special case. No binomial is ever formed, so nothing overflows.
"""
import torch
from torch import Tensor


def pass_at_k(n: Tensor, c: Tensor, k: int) -> Tensor:
    n = torch.as_tensor(n, dtype=torch.float64)
    c = torch.as_tensor(c, dtype=torch.float64)
    n, c = torch.broadcast_tensors(n, c)
    out = torch.empty(n.shape, dtype=torch.float64)
    for p, (ni, ci) in enumerate(zip(n.reshape(-1).tolist(), c.reshape(-1).tolist())):
        i = torch.arange(ni - ci + 1, ni + 1, dtype=torch.float64)
        out.reshape(-1)[p] = 1.0 - torch.prod(1.0 - k / i)
    return out
