"""The ratio comes from the log-ratio, with padding set to 0 *before* exp (a NaN or a huge value
in padding would otherwise leak NaN into the gradient even though it is masked out later).
-min(x, y) is written max(-x, -y): per token, the larger loss wins. When the ratio is inside the
clip range both terms are equal and the gradient is r*A; outside, on the side the advantage
favours, the clipped term wins and the token gets no gradient. Then the token-mean over valid
tokens, with the count clamped to 1.
"""
import torch
from torch import Tensor


def ppo_clip_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
                  eps_low: float = 0.2, eps_high: float = 0.2) -> Tensor:
    log_ratio = torch.where(mask, logp - old_logp.detach(), torch.zeros_like(logp))   # [B, T]
    ratio = torch.exp(log_ratio.clamp(-20.0, 20.0))                                  # [B, T]
    adv_tok = adv.detach()[:, None].expand_as(ratio)                                 # [B, T]
    loss_tok = torch.maximum(-adv_tok * ratio,
                             -adv_tok * ratio.clamp(1 - eps_low, 1 + eps_high))      # [B, T]
    loss_tok = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    return loss_tok.sum() / mask.sum().clamp_min(1)
