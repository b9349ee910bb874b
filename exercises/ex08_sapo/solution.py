"""tau is chosen per response from the sign of its advantage (torch.where on [B], then broadcast
over the tokens). The gate f(r) = sigmoid(tau (r - 1)) * 4 / tau has f'(1) = 1, so the gradient
coefficient at r = 1 is A, as in REINFORCE; away from 1 it decays smoothly. The per-token loss
-f(r) A is averaged within each response, then over non-empty responses (as GRPO's objective).
"""
import torch
from torch import Tensor


def sapo_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
              tau_pos: float = 1.0, tau_neg: float = 1.05) -> Tensor:
    log_ratio = torch.where(mask, logp - old_logp.detach(), torch.zeros_like(logp))   # [B, T]
    ratio = torch.exp(log_ratio.clamp(-20.0, 20.0))                                  # [B, T]
    adv = adv.detach()
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))  # [B]
    tau = tau[:, None]                                                               # [B, 1]
    gate = torch.sigmoid(tau * (ratio - 1)) * 4 / tau                                # [B, T]
    loss_tok = torch.where(mask, -gate * adv[:, None], torch.zeros_like(ratio))      # [B, T]
    n_tok = mask.sum(dim=1)
    seq_loss = loss_tok.sum(dim=1) / n_tok.clamp_min(1)                              # [B]
    return seq_loss.sum() / (n_tok > 0).sum().clamp_min(1)
