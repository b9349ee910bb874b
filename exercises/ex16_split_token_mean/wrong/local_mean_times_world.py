"""Known-wrong: the per-micro-batch mean multiplied by the data-parallel size."""
import torch

HINT = ("You multiply a per-micro-batch mean by world_size: DDP's average then returns R times a mean of "
        "means, R times the batch's gradient on an even split (NeMo Automodel PR #3830 measured 2.00x and "
        "4.00x). Check which normaliser your factor R goes with: does it turn your sum into the batch's "
        "token-mean?")


def micro_batch_loss(loss_tok, mask, n_tokens, world_size, n_micro):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    return world_size * x.sum() / mask.sum().clamp_min(1) / n_micro
