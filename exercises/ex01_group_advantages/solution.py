"""Reshape to [P, G] so that each row is one group; then every statistic is a reduction over
dim=1. torch.std is Bessel-corrected by default (divides by G - 1), as in verl (torch.std) and TRL (its
NaN-aware nanstd applies the same correction).
A group with identical rewards may leave a rounding residue in R - mean (0.3 is not exact in
float32), and residue / eps is large, so such groups are set to exactly 0 with torch.where.
"""
import torch
from torch import Tensor


def group_advantages(rewards: Tensor, group_size: int, scale: bool = True,
                     eps: float = 1e-6) -> Tensor:
    r_grp = rewards.view(-1, group_size)                        # [P, G]
    adv_grp = r_grp - r_grp.mean(dim=1, keepdim=True)           # [P, G]
    if scale:
        adv_grp = adv_grp / (r_grp.std(dim=1, keepdim=True) + eps)
    has_signal = (r_grp != r_grp[:, :1]).any(dim=1, keepdim=True)   # [P, 1]
    adv_grp = torch.where(has_signal, adv_grp, torch.zeros_like(adv_grp))
    return adv_grp.reshape(-1)                                  # [B]
