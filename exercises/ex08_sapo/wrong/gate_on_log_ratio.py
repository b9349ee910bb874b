"""Known-wrong: the gate applied to the log-ratio instead of the ratio."""
import torch

HINT = ("Your gate is fed the log-ratio. Check what SAPO's gate takes as its input and where that input is "
        "centred: the two agree only to first order near r = 1.")


def sapo_loss(logp, old_logp, adv, mask, tau_pos=1.0, tau_neg=1.05):
    lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))[:, None]
    lt = torch.where(mask, -torch.sigmoid(tau * lr) * 4 / tau * adv[:, None], torch.zeros_like(lr))
    n = mask.sum(1)
    return (lt.sum(1) / n.clamp_min(1)).sum() / (n > 0).sum().clamp_min(1)
