"""Known-wrong: the arithmetic mean of the token ratios instead of the geometric mean."""
import torch

HINT = ("Your sequence ratio averages the token ratios themselves. GSPO's ratio is the length-normalised "
        "ratio of the sequence probabilities: check in which space your average is taken. The two differ when "
        "the token ratios are spread out.")


def gspo_loss(logp, old_logp, adv, mask, eps_low=3e-4, eps_high=4e-4):
    r = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    r = torch.where(mask, r, torch.zeros_like(r))
    s = r.sum(1) / mask.sum(1).clamp_min(1)
    s = torch.where(mask.any(1), s, torch.ones_like(s))
    loss_seq = torch.maximum(-adv * s, -adv * s.clamp(1 - eps_low, 1 + eps_high))
    ne = mask.any(1)
    return torch.where(ne, loss_seq, torch.zeros_like(loss_seq)).sum() / ne.sum().clamp_min(1)
