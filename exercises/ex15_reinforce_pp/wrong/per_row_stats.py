"""Known-wrong: each response whitened with its own mean and std."""
import torch

HINT = ("You whiten each response with its own statistics. Check over what REINFORCE++ takes its mean and "
        "std: in yours, can a response whose returns are all high keep positive advantages?")


@torch.no_grad()
def reinforce_pp_advantages(rewards, mask, gamma=1.0):
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    returns = torch.zeros_like(rewards)
    running = rewards.new_zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        g_t = rewards[:, t] + gamma * running
        running = torch.where(mask[:, t], g_t, running)
        returns[:, t] = g_t
    n = mask.sum(1, keepdim=True).clamp_min(1)
    mean = torch.where(mask, returns, 0.0).sum(1, keepdim=True) / n
    var = torch.where(mask, (returns - mean) ** 2, 0.0).sum(1, keepdim=True) / (n - 1).clamp_min(1)
    adv = (returns - mean) / torch.sqrt(var + 1e-8)
    return torch.where(mask, adv, torch.zeros_like(adv))
