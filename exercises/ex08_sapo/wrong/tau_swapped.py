"""Known-wrong: tau_neg used for positive advantages and tau_pos for the others."""
import torch

HINT = ("Your loss would be right with the two temperatures exchanged: check which one the task "
        "assigns to responses with a positive advantage.")


def sapo_loss(logp, old_logp, adv, mask, tau_pos=1.0, tau_neg=1.05):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    tau = torch.where(adv > 0, torch.full_like(adv, tau_neg), torch.full_like(adv, tau_pos))[:, None]
    lt = torch.where(mask, -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * adv[:, None],
                     torch.zeros_like(ratio))
    n = mask.sum(1)
    return (lt.sum(1) / n.clamp_min(1)).sum() / (n > 0).sum().clamp_min(1)
