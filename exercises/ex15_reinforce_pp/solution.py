"""One backward pass computes every row's return-to-go at once: the running return is updated at a
valid position and carried through a masked one (a tool output inside a response), and it starts at 0
past the end. Then one mean and one Bessel-corrected variance over the valid tokens of the whole batch,
so each response weighs as many times as it has tokens. Padding is zeroed first and again at the end;
no_grad makes the advantages constants.
"""
import torch
from torch import Tensor


@torch.no_grad()
def reinforce_pp_advantages(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    returns = torch.zeros_like(rewards)
    running = rewards.new_zeros(rewards.shape[0])                          # [B] G of the next valid token
    for t in reversed(range(rewards.shape[1])):
        g_t = rewards[:, t] + gamma * running
        running = torch.where(mask[:, t], g_t, running)
        returns[:, t] = g_t
    valid = returns[mask]                                                  # [N] every valid token
    adv = (returns - valid.mean()) / torch.sqrt(valid.var(unbiased=True) + 1e-8)
    return torch.where(mask, adv, torch.zeros_like(adv))
