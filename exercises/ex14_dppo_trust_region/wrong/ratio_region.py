"""Known-wrong: the region bounds the ratio (PPO's clip) instead of the probability change."""
import torch

HINT = ("Your region is decided on the ratio r, like PPO's clip. Check which quantity DPPO's region is "
        "decided on: can a rare token multiply its probability and stay inside?")


def dppo_tv_loss(logp, old_logp, adv, mask, delta_low=0.2, delta_high=0.2, trunc=3.0):
    lp = torch.where(mask, logp, torch.zeros_like(logp))
    lo = torch.where(mask, old_logp, torch.zeros_like(logp))
    a = adv[:, None].expand_as(logp)
    r = torch.exp(lp - lo).detach()
    keep = torch.where(a > 0, r <= 1 + delta_high, r >= 1 - delta_low)
    loss_tok = -r.clamp(max=trunc) * keep * a * lp
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
