"""Known-wrong: the recursion runs over padding (bootstraps past the end of the response)."""
import torch

HINT = ("The advantage at the last token of your responses depends on what the padded tensors hold after it. "
        "Check what your recursion reads after a response's last valid token: is there any state after the "
        "end whose value should count?")


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    B, T = rewards.shape
    adv = torch.zeros_like(rewards)
    next_v = rewards.new_zeros(B)
    next_a = rewards.new_zeros(B)
    for t in reversed(range(T)):
        delta = rewards[:, t] + gamma * next_v - values[:, t]
        next_a = delta + gamma * lam * next_a
        next_v = values[:, t]
        adv[:, t] = next_a
    adv = torch.where(mask, adv, torch.zeros_like(adv))
    return adv, torch.where(mask, adv + values, torch.zeros_like(adv))
