"""Known-wrong: the sequence means divide by B, counting empty rows."""
import torch

HINT = ("Your result is off only when a response has no valid token at all: check what your mean "
        "over sequences divides by. An empty response is not a sequence.")


def aggregate(loss_tok, mask, mode, max_len=None):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    n_tok = mask.sum(dim=1)
    B = loss_tok.shape[0]
    if mode == "token-mean":
        return x.sum() / n_tok.sum().clamp_min(1)
    if mode == "seq-mean-token-mean":
        return (x.sum(dim=1) / n_tok.clamp_min(1)).sum() / B
    if mode == "seq-mean-token-sum":
        return x.sum() / B
    L = loss_tok.shape[1] if max_len is None else max_len
    return x.sum() / B / L
