"""A correct solution computed another way: token by token in float64, the factor as a Python float."""
import torch


def micro_batch_loss(loss_tok, mask, n_tokens, world_size, n_micro):
    total = torch.zeros((), dtype=torch.float64)
    for b in range(mask.shape[0]):
        for t in range(mask.shape[1]):
            if bool(mask[b, t]):
                total = total + loss_tok[b, t].double()
    return (total * (float(world_size) / max(int(n_tokens), 1))).to(loss_tok.dtype)
