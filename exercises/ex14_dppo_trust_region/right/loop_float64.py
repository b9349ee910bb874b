"""A correct solution computed another way: token by token in float64, with the gradient's constant
factors written as Python floats (the judge must accept it)."""
import math

import torch


def dppo_tv_loss(logp, old_logp, adv, mask, delta_low=0.2, delta_high=0.2, trunc=3.0):
    B, T = mask.shape
    n = max(int(mask.sum()), 1)
    total = torch.zeros((), dtype=torch.float64)
    for b in range(B):
        A = float(adv[b])
        for t in range(T):
            if not bool(mask[b, t]):
                continue
            lp, lo = float(logp[b, t]), float(old_logp[b, t])
            change = math.exp(lp) - math.exp(lo)
            keep = change <= delta_high if A > 0 else change >= -delta_low
            if keep:
                w = min(math.exp(max(min(lp - lo, 20.0), -20.0)), trunc)
                total = total - w * A * logp[b, t].double()
    return (total / n).to(logp.dtype)
