"""Known-wrong: the importance weight is not truncated at trunc."""
import torch

HINT = ("Your weight is the raw ratio r. Check what the task does to a large ratio: in yours, can one kept "
        "token with a huge ratio dominate the batch? verl's clip_ratio_c, 3 by default, is there for that.")


def dppo_tv_loss(logp, old_logp, adv, mask, delta_low=0.2, delta_high=0.2, trunc=3.0):
    lp = torch.where(mask, logp, torch.zeros_like(logp))
    lo = torch.where(mask, old_logp, torch.zeros_like(logp))
    a = adv[:, None].expand_as(logp)
    change = lp.detach().exp() - lo.exp()
    keep = torch.where(a > 0, change <= delta_high, change >= -delta_low)
    loss_tok = -torch.exp(lp - lo).detach() * keep * a * lp
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
