"""Known-wrong: the micro-batch's own mean divided by the accumulation steps (loss / grad_accum)."""
import torch

HINT = ("Your micro-batch takes its own token-mean and divides by n_micro (the classic division of the loss "
        "by gradient_accumulation_steps): right only when every micro-batch has the same number of valid "
        "tokens. With uneven lengths a token of a short micro-batch weighs more than one of a long one. Check "
        "what your micro-batch's sum is divided by: which count makes every token of the batch weigh the "
        "same?")


def micro_batch_loss(loss_tok, mask, n_tokens, world_size, n_micro):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    return x.sum() / mask.sum().clamp_min(1) / n_micro
