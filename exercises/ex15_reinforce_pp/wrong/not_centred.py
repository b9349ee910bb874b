"""Known-wrong: the returns are divided by the std but the mean is not subtracted."""
import torch

HINT = ("Your advantages are scaled but not centred. Check each step of your whitening: without centring, "
        "every token of a batch of wins is pushed up, whatever it did.")


@torch.no_grad()
def reinforce_pp_advantages(rewards, mask, gamma=1.0):
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    returns = torch.zeros_like(rewards)
    running = rewards.new_zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        g_t = rewards[:, t] + gamma * running
        running = torch.where(mask[:, t], g_t, running)
        returns[:, t] = g_t
    valid = returns[mask]
    adv = returns / torch.sqrt(valid.var() + 1e-8)
    return torch.where(mask, adv, torch.zeros_like(adv))
