"""Known-wrong: each micro-batch's own token-mean, accumulated as it is."""
import torch

HINT = ("Each micro-batch divides by its own token count, and accumulation adds the M means up: the gradient "
        "is about M times the batch's, and short micro-batches weigh as much as long ones (NeMo Automodel "
        "#3846). Check your normaliser: which count makes the sum over micro-batches the batch's token-mean?")


def micro_batch_loss(loss_tok, mask, n_tokens, world_size, n_micro):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    return x.sum() / mask.sum().clamp_min(1)
