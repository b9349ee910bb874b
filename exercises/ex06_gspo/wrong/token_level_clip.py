"""Known-wrong: token ratios clipped one by one (that is PPO / GRPO, not GSPO)."""
import torch

HINT = ("You clip each token's ratio on its own. Check what GSPO clips: how many ratios does a response have, "
        "and does it keep or lose its gradient token by token or as a whole?")


def gspo_loss(logp, old_logp, adv, mask, eps_low=3e-4, eps_high=4e-4):
    r = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    a = adv[:, None]
    lt = torch.maximum(-a * r, -a * r.clamp(1 - eps_low, 1 + eps_high))
    lt = torch.where(mask, lt, torch.zeros_like(lt))
    per_seq = lt.sum(1) / mask.sum(1).clamp_min(1)
    return per_seq.sum() / mask.any(1).sum().clamp_min(1)
