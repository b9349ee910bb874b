"""One linear formula covers the whole range once it is clamped to [-1, 0]: it is positive
(clamped to 0) before the cache, reaches -1 exactly at max_len, and would go below -1 after it
(clamped to -1). The lengths are converted to float before dividing, so the fractional penalty
inside the cache is not lost to integer division.
"""
import torch
from torch import Tensor


def overlong_penalty(lengths: Tensor, max_len: int, cache_len: int) -> Tensor:
    expected = max_len - cache_len                              # longest length without penalty
    penalty = (expected - lengths.float()) / cache_len          # [B]
    return penalty.clamp(min=-1.0, max=0.0)
