"""ex02: RLOO advantages. Fill in the body; run `python judge.py test ex02`."""
import torch
from torch import Tensor


def rloo_advantages(rewards: Tensor, group_size: int) -> Tensor:
    """RLOO advantage. rewards [B] -> adv [B] (float32).

    Groups are contiguous (G = group_size, B = P*G). A_i = R_i minus the mean of the other G-1
    rewards of its group.
    """
    raise NotImplementedError("your code here")
