"""Known-wrong: eps_low=None treated as 0.2 (a lower bound the paper does not use)."""
import torch

HINT = ("With eps_low=None your weights are still clipped from below. Check what your code does when eps_low "
        "is None: what does the task say None means? The MiniMax-M1 paper tunes only the upper bound.")


def cispo_loss(logp, old_logp, adv, mask, eps_high=0.28, eps_low=None):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    lo = 1 - (0.2 if eps_low is None else eps_low)
    weight = ratio.clamp(lo, 1 + eps_high).detach()
    loss_tok = -weight * adv[:, None] * torch.where(mask, logp, torch.zeros_like(logp))
    return loss_tok.sum() / mask.sum().clamp_min(1)
