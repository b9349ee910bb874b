"""Known-wrong: MIS returns a 0/1 mask instead of rho on the kept tokens."""
import torch

HINT = ("Your MIS weights are only 0 or 1. Check what weight a kept token should get: is it still re-weighted "
        "by its importance ratio?")


def _rho(old_logp, rollout_logp, mask, level):
    lr = torch.where(mask, old_logp - rollout_logp, torch.zeros_like(old_logp)).detach()
    if level == "sequence":
        lr = lr.sum(1, keepdim=True).expand_as(lr)
    return lr.exp()


def tis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask, rho.clamp(max=cap), torch.zeros_like(rho))


def mis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return (mask & (rho <= cap)).to(rho.dtype)
