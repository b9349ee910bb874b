"""Known-wrong: the weights are not detached."""
import torch

HINT = ("Your weights carry a gradient. Check how your weights are computed: they come from two fixed "
        "policies and multiply the loss as constants, so should anything flow back through them?")


def _rho(old_logp, rollout_logp, mask, level):
    lr = torch.where(mask, old_logp - rollout_logp, torch.zeros_like(old_logp))
    if level == "sequence":
        lr = lr.sum(1, keepdim=True).expand_as(lr)
    return lr.exp()


def tis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask, rho.clamp(max=cap), torch.zeros_like(rho))


def mis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask & (rho <= cap), rho, torch.zeros_like(rho))
