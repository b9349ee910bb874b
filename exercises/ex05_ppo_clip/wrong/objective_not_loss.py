"""Known-wrong: returns the objective J (to maximise) instead of the loss -J."""
import torch

HINT = ("Your result has the right size but the opposite sign. Check what the paper's formula is and what a "
        "function named *_loss returns: which of the two does an optimiser minimise?")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    a = adv[:, None]
    obj = torch.minimum(a * ratio, a * ratio.clamp(1 - eps_low, 1 + eps_high))
    return torch.where(mask, obj, torch.zeros_like(obj)).sum() / mask.sum().clamp_min(1)
