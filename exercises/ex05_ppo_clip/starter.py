"""ex05: PPO clipped surrogate loss. Fill in the body; run `python judge.py test ex05`."""
import torch
from torch import Tensor


def ppo_clip_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
                  eps_low: float = 0.2, eps_high: float = 0.2) -> Tensor:
    """Token-mean of -min(r A, clip(r, 1-eps_low, 1+eps_high) A). Returns a scalar to minimise.

    logp, old_logp [B, T]; adv [B] (broadcast to the tokens of each response); mask bool [B, T].
    r = exp(logp - old_logp). Padding (mask False) may hold NaN and must not matter.
    """
    raise NotImplementedError("your code here")
