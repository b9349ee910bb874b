"""Known-wrong: only the clipped term (no pessimistic min)."""
import torch

HINT = ("Your loss keeps only the clipped term. Check how many candidate terms your loss compares per token: "
        "PPO's objective is pessimistic, so that a token can be clipped on one side but never rewarded for "
        "going further on the other.")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    loss_tok = -adv[:, None] * ratio.clamp(1 - eps_low, 1 + eps_high)
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
