"""Known-wrong: token-mean instead of seq-mean-token-mean."""
import torch

HINT = ("Your loss is right when all responses have the same length but not otherwise. Check in which order "
        "your loss averages over tokens and over responses, against the task's formula: does each response "
        "weigh the same, or each token?")


def sapo_loss(logp, old_logp, adv, mask, tau_pos=1.0, tau_neg=1.05):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))[:, None]
    lt = torch.where(mask, -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * adv[:, None],
                     torch.zeros_like(ratio))
    return lt.sum() / mask.sum().clamp_min(1)
