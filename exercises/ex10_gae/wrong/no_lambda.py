"""Known-wrong: A_t = delta_t + gamma A_{t+1} (lam ignored)."""
import torch

HINT = ("Your result does not change when lam changes. Check the factor your recursion discounts by as it "
        "accumulates the advantages: where does lam enter?")


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    r = torch.where(mask, rewards, torch.zeros_like(rewards))
    v = torch.where(mask, values, torch.zeros_like(values))
    B, T = r.shape
    next_v, next_a = r.new_zeros(B), r.new_zeros(B)
    adv = torch.zeros_like(r)
    for t in reversed(range(T)):
        a_t = r[:, t] + gamma * next_v - v[:, t] + gamma * next_a
        valid = mask[:, t]
        adv[:, t] = torch.where(valid, a_t, torch.zeros_like(a_t))
        next_v = torch.where(valid, v[:, t], next_v)
        next_a = torch.where(valid, a_t, next_a)
    return adv, torch.where(mask, adv + v, torch.zeros_like(adv))
