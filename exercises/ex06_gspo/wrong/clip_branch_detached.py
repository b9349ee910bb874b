"""Known-wrong: the clipped term is detached (right values, half the gradient inside the range)."""
import torch

HINT = ("Your loss values are right but unclipped responses get only half the expected gradient. Where the "
        "two candidate terms are equal, autograd shares the gradient between them: check whether both of your "
        "terms are still connected to the graph.")


def gspo_loss(logp, old_logp, adv, mask, eps_low=3e-4, eps_high=4e-4):
    lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
    s = torch.exp(lr.sum(1) / mask.sum(1).clamp_min(1))
    loss_seq = torch.maximum(-adv * s, -adv * s.clamp(1 - eps_low, 1 + eps_high).detach())
    ne = mask.any(1)
    return torch.where(ne, loss_seq, torch.zeros_like(loss_seq)).sum() / ne.sum().clamp_min(1)
