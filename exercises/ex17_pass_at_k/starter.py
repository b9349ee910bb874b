"""ex17: the unbiased pass@k estimator. Fill in the body; run `python judge.py test ex17`."""
import torch
from torch import Tensor


def pass_at_k(n: Tensor, c: Tensor, k: int) -> Tensor:
    """pass@k per prompt from n samples [P] of which c [P] are right: 1 - C(n - c, k) / C(n, k), float64 [P]."""
    raise NotImplementedError("your code here")
