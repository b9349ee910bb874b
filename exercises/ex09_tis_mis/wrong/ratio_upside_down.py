"""Known-wrong: rho = pi_rollout / pi_old."""
import torch

HINT = ("Your ratio is upside down. Check which distribution drew the samples: which one belongs at the "
        "bottom of an importance weight?")


def _rho(old_logp, rollout_logp, mask, level):
    lr = torch.where(mask, rollout_logp - old_logp, torch.zeros_like(old_logp)).detach()
    if level == "sequence":
        lr = lr.sum(1, keepdim=True).expand_as(lr)
    return lr.exp()


def tis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask, rho.clamp(max=cap), torch.zeros_like(rho))


def mis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask & (rho <= cap), rho, torch.zeros_like(rho))
