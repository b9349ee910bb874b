"""ex14: DPPO's trust-region loss. Fill in the body; run `python judge.py test ex14`."""
import torch
from torch import Tensor


def dppo_tv_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, delta_low: float = 0.2,
                 delta_high: float = 0.2, trunc: float = 3.0) -> Tensor:
    """Token-mean of -sg(min(r, trunc)) * m * A * logp, m DPPO's mask on pi - pi_old. Returns a scalar.

    logp, old_logp [B, T]; adv [B]; mask bool [B, T]; r = exp(logp - old_logp).
    m = [pi - pi_old <= delta_high] where A > 0, [pi - pi_old >= -delta_low] where A <= 0.
    sg = stop-gradient. Padding may hold NaN.
    """
    raise NotImplementedError("your code here")
