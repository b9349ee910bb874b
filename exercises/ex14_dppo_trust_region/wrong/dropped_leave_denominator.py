"""Known-wrong: the token-mean divides by the kept tokens only."""
import torch

HINT = ("Your loss is divided by the number of kept tokens. Check what your normaliser counts: does a dropped "
        "token leave the batch, or only lose its gradient?")


def dppo_tv_loss(logp, old_logp, adv, mask, delta_low=0.2, delta_high=0.2, trunc=3.0):
    lp = torch.where(mask, logp, torch.zeros_like(logp))
    lo = torch.where(mask, old_logp, torch.zeros_like(logp))
    a = adv[:, None].expand_as(logp)
    change = lp.detach().exp() - lo.exp()
    keep = torch.where(a > 0, change <= delta_high, change >= -delta_low) & mask
    loss_tok = -torch.exp(lp - lo).detach().clamp(max=trunc) * keep * a * lp
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / keep.sum().clamp_min(1)
