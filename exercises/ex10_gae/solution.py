"""One backward pass over t for the whole batch at once. next_value and next_adv hold V and A of
the next *valid* token of each row (0 beyond the end, so nothing is bootstrapped past EOS). At a
valid position they are updated; at a masked one they are carried through unchanged, which
skips tool tokens inside a response and makes trailing padding harmless. Junk on padding is
zeroed first so that NaN cannot leak through 0 * NaN.
"""
import torch
from torch import Tensor


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[Tensor, Tensor]:
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    values = torch.where(mask, values, torch.zeros_like(values))
    B, T = rewards.shape
    next_value = rewards.new_zeros(B)                          # [B] V of the next valid token
    next_adv = rewards.new_zeros(B)                            # [B] A of the next valid token
    adv = torch.zeros_like(rewards)
    for t in reversed(range(T)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        a_t = delta + gamma * lam * next_adv
        valid = mask[:, t]
        adv[:, t] = torch.where(valid, a_t, torch.zeros_like(a_t))
        next_value = torch.where(valid, values[:, t], next_value)
        next_adv = torch.where(valid, a_t, next_adv)
    returns = torch.where(mask, adv + values, torch.zeros_like(adv))
    return adv, returns
