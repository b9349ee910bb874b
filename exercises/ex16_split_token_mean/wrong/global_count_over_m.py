"""Known-wrong: the global count and then the accumulation steps too."""
import torch

HINT = ("You divide by the whole batch's n_tokens and then by n_micro as well, so the gradient comes out "
        "divided by M. Check what the global count already covers: does it leave anything for a factor of the "
        "micro-batches to do?")


def micro_batch_loss(loss_tok, mask, n_tokens, world_size, n_micro):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    return world_size * x.sum() / max(n_tokens, 1) / n_micro
