"""The whole batch's token-mean gives every valid token the weight 1/N, N counted over the whole batch.
A micro-batch therefore sums its tokens and divides by that global N, not by its own count; the
factor R undoes DDP's average over ranks. Nothing depends on M: accumulation adds, and the pieces'
weights already add up to the batch's.
"""
import torch
from torch import Tensor


def micro_batch_loss(loss_tok: Tensor, mask: Tensor, n_tokens: int, world_size: int, n_micro: int) -> Tensor:
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))      # [b, T], padding -> 0
    return world_size * x.sum() / max(n_tokens, 1)
