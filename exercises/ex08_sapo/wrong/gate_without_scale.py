"""Known-wrong: the gate without its 4 / tau factor."""
import torch

HINT = ("Your gate lacks its normalising factor. With it, the gate's slope at r = 1 is exactly 1, so "
        "that on-policy SAPO gives the plain policy gradient; check your gradient at r = 1.")


def sapo_loss(logp, old_logp, adv, mask, tau_pos=1.0, tau_neg=1.05):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))[:, None]
    lt = torch.where(mask, -torch.sigmoid(tau * (ratio - 1)) * adv[:, None], torch.zeros_like(ratio))
    n = mask.sum(1)
    return (lt.sum(1) / n.clamp_min(1)).sum() / (n > 0).sum().clamp_min(1)
