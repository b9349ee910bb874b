"""ex01: GRPO group advantages. Fill in the body; run `python judge.py test ex01`."""
import torch
from torch import Tensor


def group_advantages(rewards: Tensor, group_size: int, scale: bool = True,
                     eps: float = 1e-6) -> Tensor:
    """GRPO advantage per response. rewards [B] -> adv [B] (float32).

    Groups are contiguous: rows g*G ... g*G+G-1 share a prompt (G = group_size, B = P*G).
    A_i = (R_i - mean of its group) / (Bessel-corrected std of its group + eps);
    scale=False (Dr. GRPO): A_i = R_i - mean, no division. A group with equal rewards gets 0.
    """
    raise NotImplementedError("your code here")
