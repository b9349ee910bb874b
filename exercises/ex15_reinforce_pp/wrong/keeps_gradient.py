"""Known-wrong: right values, but the advantages carry the rewards' gradient."""
import torch

HINT = ("Your advantages carry a gradient. Check how they are computed: they are constants of the loss, so "
        "should anything flow back through them?")


def reinforce_pp_advantages(rewards, mask, gamma=1.0):
    rewards = torch.where(mask, rewards, torch.zeros_like(rewards))
    G = []
    running = rewards.new_zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        g_t = rewards[:, t] + gamma * running
        running = torch.where(mask[:, t], g_t, running)
        G.append(g_t)
    returns = torch.stack(G[::-1], dim=1)
    valid = returns[mask]
    adv = (returns - valid.mean()) / torch.sqrt(valid.var() + 1e-8)
    return torch.where(mask, adv, torch.zeros_like(adv))
