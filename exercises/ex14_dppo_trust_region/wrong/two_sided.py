"""Known-wrong: the mask drops any token whose probability moved more than delta, either way."""
import torch

HINT = ("Your mask drops a token that moved against its advantage too. Check on which side DPPO's region "
        "binds for each sign of the advantage: is a token dropped for moving the way its advantage does not "
        "push it?")


def dppo_tv_loss(logp, old_logp, adv, mask, delta_low=0.2, delta_high=0.2, trunc=3.0):
    lp = torch.where(mask, logp, torch.zeros_like(logp))
    lo = torch.where(mask, old_logp, torch.zeros_like(logp))
    a = adv[:, None].expand_as(logp)
    change = lp.detach().exp() - lo.exp()
    keep = (change <= delta_high) & (change >= -delta_low)
    loss_tok = -torch.exp(lp - lo).detach().clamp(max=trunc) * keep * a * lp
    return torch.where(mask, loss_tok, torch.zeros_like(loss_tok)).sum() / mask.sum().clamp_min(1)
