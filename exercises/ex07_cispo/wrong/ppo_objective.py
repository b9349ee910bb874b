"""Known-wrong: PPO's clipped surrogate instead of CISPO."""
import torch

HINT = ("Your loss behaves like PPO's clipped objective, which drops the gradient of clipped tokens. Check "
        "what CISPO clips and how it uses it: does a clipped token keep a bounded gradient in yours?")


def cispo_loss(logp, old_logp, adv, mask, eps_high=0.28, eps_low=None):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    lo = 0.0 if eps_low is None else 1 - eps_low
    a = adv[:, None]
    lt = torch.maximum(-a * ratio, -a * ratio.clamp(lo, 1 + eps_high))
    return torch.where(mask, lt, torch.zeros_like(lt)).sum() / mask.sum().clamp_min(1)
