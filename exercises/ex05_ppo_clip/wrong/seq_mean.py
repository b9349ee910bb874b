"""Known-wrong: seq-mean-token-mean instead of token-mean."""
import torch

HINT = ("Your loss is right when all responses have the same length but not otherwise. Check the order of "
        "your averages: in this loss, does a token of a long response weigh the same as a token of a short "
        "one?")


def ppo_clip_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    a = adv[:, None]
    loss_tok = torch.maximum(-a * ratio, -a * ratio.clamp(1 - eps_low, 1 + eps_high))
    loss_tok = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    per_seq = loss_tok.sum(1) / mask.sum(1).clamp_min(1)
    return per_seq.sum() / mask.any(1).sum().clamp_min(1)
