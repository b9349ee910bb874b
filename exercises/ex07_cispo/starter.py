"""ex07: CISPO loss. Fill in the body; run `python judge.py test ex07`."""
import torch
from torch import Tensor


def cispo_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
               eps_high: float = 0.28, eps_low: float | None = None) -> Tensor:
    """Token-mean of -sg(clip(r, 1-eps_low, 1+eps_high)) * A * logp. Returns a scalar.

    logp, old_logp [B, T]; adv [B]; mask bool [B, T]; r = exp(logp - old_logp).
    eps_low=None: no lower bound. sg = stop-gradient. Padding may hold NaN.
    """
    raise NotImplementedError("your code here")
