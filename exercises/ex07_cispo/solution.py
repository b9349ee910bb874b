"""The clipped ratio is computed, then detached: it becomes a per-token constant weight, so the
gradient reaches the parameters only through log pi, as in REINFORCE. That is the whole
difference from PPO: a token outside the range keeps a bounded gradient (the weight saturates at
1 + eps_high) instead of losing it. No lower bound (eps_low=None) means a lower clip of 0. Padding
is zeroed in both the log-ratio and logp before use, then the token-mean.
"""
import torch
from torch import Tensor


def cispo_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
               eps_high: float = 0.28, eps_low: float | None = None) -> Tensor:
    log_ratio = torch.where(mask, logp - old_logp.detach(), torch.zeros_like(logp))   # [B, T]
    ratio = torch.exp(log_ratio.clamp(-20.0, 20.0))                                  # [B, T]
    lo = 0.0 if eps_low is None else 1 - eps_low
    weight = ratio.clamp(lo, 1 + eps_high).detach()                        # [B, T], a constant
    logp_valid = torch.where(mask, logp, torch.zeros_like(logp))
    loss_tok = -weight * adv.detach()[:, None] * logp_valid                          # [B, T]
    return loss_tok.sum() / mask.sum().clamp_min(1)
