"""Both weights share one log-ratio: log rho = old_logp - rollout_logp, detached (the weights are
constants) and zeroed on padding before anything else. At sequence level the product over the
response is the sum of the log-ratios, broadcast back to every token of the row. A clamp of
+-20 keeps exp finite. TIS truncates at the cap; MIS keeps rho where it is <= cap and 0 elsewhere.
Padding is 0 in both.
"""
import torch
from torch import Tensor


def _log_rho(old_logp, rollout_logp, mask, level):
    log_rho = torch.where(mask, old_logp.detach() - rollout_logp.detach(),
                          torch.zeros_like(old_logp))                       # [B, T]
    if level == "sequence":
        log_rho = log_rho.sum(dim=1, keepdim=True).expand_as(log_rho)      # [B, T] product per row
    return log_rho.clamp(-20.0, 20.0)


def tis_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
                level: str = "token") -> Tensor:
    rho = torch.exp(_log_rho(old_logp, rollout_logp, mask, level))
    return torch.where(mask, rho.clamp(max=cap), torch.zeros_like(rho))


def mis_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
                level: str = "token") -> Tensor:
    rho = torch.exp(_log_rho(old_logp, rollout_logp, mask, level))
    return torch.where(mask & (rho <= cap), rho, torch.zeros_like(rho))
