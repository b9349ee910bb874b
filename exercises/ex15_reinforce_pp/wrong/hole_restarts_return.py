"""Known-wrong: a masked position inside a response resets the return (treated as an end)."""
import torch

HINT = ("Your return restarts after a masked position inside a response. Check what your recursion does at "
        "such a position: is a tool output the end of the response?")


@torch.no_grad()
def reinforce_pp_advantages(rewards, mask, gamma=1.0):
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    returns = torch.zeros_like(rewards)
    running = rewards.new_zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        g_t = rewards[:, t] + gamma * running
        running = torch.where(mask[:, t], g_t, torch.zeros_like(g_t))
        returns[:, t] = g_t
    valid = returns[mask]
    adv = (returns - valid.mean()) / torch.sqrt(valid.var() + 1e-8)
    return torch.where(mask, adv, torch.zeros_like(adv))
