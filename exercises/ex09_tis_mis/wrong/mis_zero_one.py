"""Known-wrong: MIS returns a 0/1 mask instead of rho on the kept tokens."""
import torch

HINT = ("Your MIS weights are only 0 or 1. The tokens that are kept must still be re-weighted by "
        "their importance ratio; only the ratios above the cap are dropped.")


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
