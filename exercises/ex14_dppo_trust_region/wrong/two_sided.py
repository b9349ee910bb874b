"""Known-wrong: the mask drops any token whose probability moved more than delta, either way."""
import torch

HINT = ("Your mask drops a token that moved against its advantage too. DPPO's region is one-sided: "
        "a token with A > 0 is dropped only when its probability rose by more than delta_high, one with "
        "A <= 0 only when it fell by more than delta_low.")


def dppo_tv_loss(logp, old_logp, adv, mask, delta_low=0.2, delta_high=0.2, trunc=3.0):
    lp = torch.where(mask, logp, torch.zeros_like(logp))
    lo = torch.where(mask, old_logp, torch.zeros_like(logp))
    a = adv[:, None].expand_as(logp)
    change = lp.detach().exp() - lo.exp()
    keep = (change <= delta_high) & (change >= -delta_low)
    loss_tok = -torch.exp(lp - lo).detach().clamp(max=trunc) * keep * a * lp
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
