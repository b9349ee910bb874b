"""Known-wrong: the clipped term is detached (right values, half the gradient inside the range)."""
import torch

HINT = ("Your loss values are right but tokens inside the clip range get only half the expected gradient. "
        "Where the two candidate terms are equal, autograd shares the gradient between them: check whether "
        "both of your terms are still connected to the graph.")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    a = adv[:, None]
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high).detach()
    loss_tok = torch.maximum(-a * ratio, -a * clipped)
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
