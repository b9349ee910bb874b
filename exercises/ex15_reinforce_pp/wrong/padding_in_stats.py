"""Known-wrong: the padding's zeros take part in the mean and the std."""
import torch

HINT = ("Your statistics include the padded positions (as zeros). Check which positions your mean and std are "
        "taken over: which tokens does the mask mark as valid?")


@torch.no_grad()
def reinforce_pp_advantages(rewards, mask, gamma=1.0):
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    returns = torch.zeros_like(rewards)
    running = rewards.new_zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        g_t = rewards[:, t] + gamma * running
        running = torch.where(mask[:, t], g_t, running)
        returns[:, t] = torch.where(mask[:, t], g_t, torch.zeros_like(g_t))
    adv = (returns - returns.mean()) / torch.sqrt(returns.var() + 1e-8)
    return torch.where(mask, adv, torch.zeros_like(adv))
