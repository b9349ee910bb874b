"""Known-wrong: the product of the token ratios (sum of log-ratios), not the geometric mean."""
import torch

HINT = ("Your sequence ratio drifts further from 1 the longer the response is. Check how your ratio depends "
        "on the response's length: GSPO means it to stay close to 1 for short and long answers alike.")


def gspo_loss(logp, old_logp, adv, mask, eps_low=3e-4, eps_high=4e-4):
    lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
    s = torch.exp(lr.sum(1))
    loss_seq = torch.maximum(-adv * s, -adv * s.clamp(1 - eps_low, 1 + eps_high))
    ne = mask.any(1)
    return torch.where(ne, loss_seq, torch.zeros_like(loss_seq)).sum() / ne.sum().clamp_min(1)
