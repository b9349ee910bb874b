"""Known-wrong: a masked position inside a response resets the recursion (treated as an end)."""
import torch

HINT = ("Your result is wrong only for responses with masked positions inside them (such as tool outputs). "
        "Check what your recursion does at such a position: is it the end of the response?")


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    r = torch.where(mask, rewards, torch.zeros_like(rewards))
    v = torch.where(mask, values, torch.zeros_like(values))
    B, T = r.shape
    next_v, next_a = r.new_zeros(B), r.new_zeros(B)
    adv = torch.zeros_like(r)
    for t in reversed(range(T)):
        a_t = r[:, t] + gamma * next_v - v[:, t] + gamma * lam * next_a
        valid = mask[:, t]
        adv[:, t] = torch.where(valid, a_t, torch.zeros_like(a_t))
        next_v = torch.where(valid, v[:, t], torch.zeros_like(next_v))
        next_a = torch.where(valid, a_t, torch.zeros_like(next_a))
    return adv, torch.where(mask, adv + v, torch.zeros_like(adv))
