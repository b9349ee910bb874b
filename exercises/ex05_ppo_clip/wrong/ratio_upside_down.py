"""Known-wrong: r = pi_old / pi_theta."""
import torch

HINT = ("Your importance ratio is upside down. Check which policy is on top of yours: the ratio measures how "
        "much more likely a token has become under the policy being trained than under the policy that "
        "sampled it.")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, old_logp - logp, torch.zeros_like(logp)))
    a = adv[:, None]
    loss_tok = torch.maximum(-a * ratio, -a * ratio.clamp(1 - eps_low, 1 + eps_high))
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
