"""Reward shaping: DAPO's soft overlong punishment. Chapter 03 and exercise ex11; the toy trainer
(chapter 07) adds it to the correctness reward."""
from __future__ import annotations

import torch
from torch import Tensor

from .masking import check_int, check_tensor


def overlong_penalty(lengths: Tensor, max_len: int, cache_len: int) -> Tensor:
    """DAPO's soft overlong punishment (DAPO Eq. 13). lengths [B] (int) -> penalty [B] (float).

    0 for |y| <= max_len - cache_len, then linear down to -1 at |y| = max_len, and -1 beyond.
    It is added to the correctness reward.
    """
    check_tensor(lengths, "lengths", ndim=1)
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be an integer tensor, got {lengths.dtype}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be >= 0, got a minimum of {int(lengths.min())}")
    check_int(max_len, "max_len")
    check_int(cache_len, "cache_len")
    if cache_len > max_len:
        raise ValueError(f"cache_len ({cache_len}) must not exceed max_len ({max_len})")
    expected = max_len - cache_len                              # longest length with no penalty
    penalty = (expected - lengths).float() / cache_len          # [B], in (-1, 0] inside the cache
    penalty = penalty.clamp(min=-1.0, max=0.0)
    return torch.where(lengths > max_len, torch.full_like(penalty, -1.0), penalty)
