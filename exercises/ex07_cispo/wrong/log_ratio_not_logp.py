"""Known-wrong: the weight multiplies the log-ratio instead of log pi (same gradient, wrong value)."""
import torch

HINT = ("Your gradient is right but the loss value is not, so something without a gradient has crept into "
        "your loss. Check what your weight multiplies against the task's formula: which log-probability is "
        "it, and under which policy?")


def cispo_loss(logp, old_logp, adv, mask, eps_high=0.28, eps_low=None):
    lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
    lo = 0.0 if eps_low is None else 1 - eps_low
    weight = torch.exp(lr).clamp(lo, 1 + eps_high).detach()
    loss_tok = -weight * adv[:, None] * lr
    return loss_tok.sum() / mask.sum().clamp_min(1)
