"""Known-wrong: the padding is zeroed by multiplying with the mask (NaN * 0 = NaN)."""

HINT = ("You zero the padding by multiplying with the mask, but NaN times 0 is NaN: a NaN in the padding "
        "reaches your sum. Check how your code takes the padding out: can a masked position's value still "
        "reach the sum?")


def micro_batch_loss(loss_tok, mask, n_tokens, world_size, n_micro):
    return world_size * (loss_tok * mask).sum() / max(n_tokens, 1)
