"""A correct solution computed another way: plain Python loops in float64, converted back at the end."""
import math

import torch


def reinforce_pp_advantages(rewards, mask, gamma=1.0):
    B, T = mask.shape
    G = [[0.0] * T for _ in range(B)]
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if bool(mask[b, t]):
                running = float(rewards[b, t]) + gamma * running
                G[b][t] = running
    cells = [(b, t) for b in range(B) for t in range(T) if bool(mask[b, t])]
    mean = sum(G[b][t] for b, t in cells) / len(cells)
    var = sum((G[b][t] - mean) ** 2 for b, t in cells) / (len(cells) - 1)
    out = [[(G[b][t] - mean) / math.sqrt(var + 1e-8) if bool(mask[b, t]) else 0.0 for t in range(T)]
           for b in range(B)]
    return torch.tensor(out, dtype=torch.float64).to(rewards.dtype)
