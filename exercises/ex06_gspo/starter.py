"""ex06: GSPO loss. Fill in the body; run `python judge.py test ex06`."""
import torch
from torch import Tensor


def gspo_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
              eps_low: float = 3e-4, eps_high: float = 4e-4) -> Tensor:
    """GSPO: s_i = exp(mean over valid tokens of (logp - old_logp)), clipped per sequence.

    logp, old_logp [B, T]; adv [B]; mask bool [B, T]. Returns the mean over non-empty responses
    of -min(s A, clip(s, 1-eps_low, 1+eps_high) A), a scalar. The gradient flows through s.
    """
    raise NotImplementedError("your code here")
