"""ex08: SAPO loss. Fill in the body; run `python judge.py test ex08`."""
import torch
from torch import Tensor


def sapo_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
              tau_pos: float = 1.0, tau_neg: float = 1.05) -> Tensor:
    """Seq-mean-token-mean of -f(r) * A with f(r) = sigmoid(tau (r - 1)) * 4 / tau.

    logp, old_logp [B, T]; adv [B]; mask bool [B, T]; r = exp(logp - old_logp);
    tau = tau_pos where A > 0, else tau_neg. Returns a scalar. Padding may hold NaN.
    """
    raise NotImplementedError("your code here")
