"""Known-wrong: token-mean averages over every position, padding included."""
import torch

HINT = ("Your token-mean is too small in magnitude whenever there is padding. Check what your denominator "
        "counts: which tokens does the mask mark as valid?")


def aggregate(loss_tok, mask, mode, max_len=None):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    n_tok = mask.sum(dim=1)
    n_seq = mask.any(dim=1).sum().clamp_min(1)
    if mode == "token-mean":
        return x.mean()
    if mode == "seq-mean-token-mean":
        return (x.sum(dim=1) / n_tok.clamp_min(1)).sum() / n_seq
    if mode == "seq-mean-token-sum":
        return x.sum() / n_seq
    L = loss_tok.shape[1] if max_len is None else max_len
    return x.sum() / n_seq / L
