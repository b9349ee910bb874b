"""Known-wrong: the sequence-level ratio is the geometric mean instead of the product."""
import torch

HINT = ("At sequence level your ratio is a per-token average. Check how the task combines a response's token "
        "ratios into the importance ratio of the whole response: is it normalised by the length?")


def _rho(old_logp, rollout_logp, mask, level):
    lr = torch.where(mask, old_logp - rollout_logp, torch.zeros_like(old_logp)).detach()
    if level == "sequence":
        lr = (lr.sum(1, keepdim=True) / mask.sum(1, keepdim=True).clamp_min(1)).expand_as(lr)
    return lr.exp()


def tis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask, rho.clamp(max=cap), torch.zeros_like(rho))


def mis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask & (rho <= cap), rho, torch.zeros_like(rho))
