"""Known-wrong: MIS truncates at the cap (that is TIS)."""
import torch

HINT = ("Your MIS weights truncate large ratios at the cap, which is what TIS does. Check what MIS does with "
        "a token (or response) whose ratio is above the cap: is it kept at all?")


def _rho(old_logp, rollout_logp, mask, level):
    lr = torch.where(mask, old_logp - rollout_logp, torch.zeros_like(old_logp)).detach()
    if level == "sequence":
        lr = lr.sum(1, keepdim=True).expand_as(lr)
    return lr.exp()


def tis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    rho = _rho(old_logp, rollout_logp, mask, level)
    return torch.where(mask, rho.clamp(max=cap), torch.zeros_like(rho))


def mis_weights(old_logp, rollout_logp, mask, cap=2.0, level="token"):
    return tis_weights(old_logp, rollout_logp, mask, cap, level)
