"""The mean of the others is (group sum - R_i) / (G - 1): one sum per group, no loop over i.
As [P, G] rows: others_mean = (row sum - r) / (G - 1), and the advantage is r - others_mean.
It equals G / (G - 1) times the Dr. GRPO advantage R_i - mean(R).
"""
import torch
from torch import Tensor


def rloo_advantages(rewards: Tensor, group_size: int) -> Tensor:
    r_grp = rewards.view(-1, group_size)                                    # [P, G]
    others_mean = (r_grp.sum(dim=1, keepdim=True) - r_grp) / (group_size - 1)   # [P, G]
    return (r_grp - others_mean).reshape(-1)                               # [B]
