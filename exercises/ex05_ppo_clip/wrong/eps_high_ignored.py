"""Known-wrong: one eps for both sides (eps_high ignored)."""
import torch

HINT = ("Your clip range ignores eps_high. Check where each bound of your range comes from: which parameter "
        "sets the upper one? DAPO's Clip-Higher widens only that one.")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    a = adv[:, None]
    loss_tok = torch.maximum(-a * ratio, -a * ratio.clamp(1 - eps_low, 1 + eps_low))
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
