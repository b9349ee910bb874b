"""The trust region is decided on probabilities: a token whose advantage is positive may raise its
probability by at most delta_high, one whose advantage is not positive may lower it by at most
delta_low; past that it is dropped, with no gradient. The mask and the truncated ratio are constants,
so the gradient reaches the parameters only through log pi, as in CISPO. Padding is zeroed before
any exp, and the token-mean counts every valid token, dropped or not.
"""
import torch
from torch import Tensor


def dppo_tv_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, delta_low: float = 0.2,
                 delta_high: float = 0.2, trunc: float = 3.0) -> Tensor:
    logp_valid = torch.where(mask, logp, torch.zeros_like(logp))                        # [B, T]
    old_valid = torch.where(mask, old_logp.detach(), torch.zeros_like(logp))
    a = adv.detach()[:, None].expand_as(logp)                                           # [B, T]
    change = logp_valid.detach().exp() - old_valid.exp()                                # pi - pi_old
    keep = torch.where(a > 0, change <= delta_high, change >= -delta_low)              # [B, T]
    weight = torch.exp((logp_valid.detach() - old_valid).clamp(-20.0, 20.0)).clamp(max=trunc)
    loss_tok = -weight * keep * a * logp_valid                                          # [B, T]
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
