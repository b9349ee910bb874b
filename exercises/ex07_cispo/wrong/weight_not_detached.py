"""Known-wrong: the clipped weight is not detached (right values, wrong gradient)."""
import torch

HINT = ("Your loss values are right but the gradient is not: your weight still passes gradient back to logp. "
        "Check which factor the task marks with the stop-gradient: which one should carry the gradient?")


def cispo_loss(logp, old_logp, adv, mask, eps_high=0.28, eps_low=None):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    lo = 0.0 if eps_low is None else 1 - eps_low
    weight = ratio.clamp(lo, 1 + eps_high)
    loss_tok = -weight * adv[:, None] * torch.where(mask, logp, torch.zeros_like(logp))
    return loss_tok.sum() / mask.sum().clamp_min(1)
