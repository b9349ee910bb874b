"""Known-wrong: the mean log-ratio divides by T, counting padding."""
import torch

HINT = ("Your sequence ratio is pulled towards 1 for short responses. Check which positions your average of "
        "the log-ratio runs over: does it count the padding after a response?")


def gspo_loss(logp, old_logp, adv, mask, eps_low=3e-4, eps_high=4e-4):
    lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
    s = torch.exp(lr.mean(1))
    loss_seq = torch.maximum(-adv * s, -adv * s.clamp(1 - eps_low, 1 + eps_high))
    ne = mask.any(1)
    return torch.where(ne, loss_seq, torch.zeros_like(loss_seq)).sum() / ne.sum().clamp_min(1)
