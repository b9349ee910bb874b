"""Known-wrong: padding positions keep the carried advantage instead of 0."""
import torch

HINT = ("Your advantages or returns are not 0 on padding positions (where mask is False). Check what your "
        "code writes there.")


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    r = torch.where(mask, rewards, torch.zeros_like(rewards))
    v = torch.where(mask, values, torch.zeros_like(values))
    B, T = r.shape
    next_v, next_a = r.new_zeros(B), r.new_zeros(B)
    adv = torch.zeros_like(r)
    for t in reversed(range(T)):
        a_t = r[:, t] + gamma * next_v - v[:, t] + gamma * lam * next_a
        valid = mask[:, t]
        next_v = torch.where(valid, v[:, t], next_v)
        next_a = torch.where(valid, a_t, next_a)
        adv[:, t] = next_a
    return adv, adv + v
