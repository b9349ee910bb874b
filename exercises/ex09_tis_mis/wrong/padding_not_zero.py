"""Known-wrong: the weights are not set to 0 on padding."""
import torch

HINT = ("Your weights are not 0 on padding positions (mask False). Check what your code puts there: a weight "
        "on padding would re-introduce tokens that are not part of any response.")


def _rho(old_logp, rollout_logp, mask, level):
    lr = torch.where(mask, old_logp - rollout_logp, torch.zeros_like(old_logp)).detach()
    if level == "sequence":
        lr = lr.sum(1, keepdim=True).expand_as(lr)
    return lr.exp()


def tis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    return _rho(old_logp, rollout_logp, mask, level).clamp(max=cap)


def mis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(rho <= cap, rho, torch.zeros_like(rho))
