"""Known-wrong: the truncated ratio passes gradient (right values, wrong gradient)."""
import torch

HINT = ("Your loss values are right but the gradient is not: your truncated ratio still passes gradient back "
        "to logp. Check which factors of the task's formula carry a stop-gradient: which one alone should "
        "carry the gradient?")


def dppo_tv_loss(logp, old_logp, adv, mask, delta_low=0.2, delta_high=0.2, trunc=3.0):
    lp = torch.where(mask, logp, torch.zeros_like(logp))
    lo = torch.where(mask, old_logp, torch.zeros_like(logp))
    a = adv[:, None].expand_as(logp)
    change = lp.detach().exp() - lo.exp()
    keep = torch.where(a > 0, change <= delta_high, change >= -delta_low)
    loss_tok = -torch.exp(lp - lo).clamp(max=trunc) * keep * a * lp
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
