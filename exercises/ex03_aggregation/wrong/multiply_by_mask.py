"""Known-wrong: padding removed by multiplying with the mask (NaN * 0 = NaN leaks)."""
import torch

HINT = ("A NaN in a padding position leaks into your result. Check how your code takes the padding out: what "
        "is NaN times 0, and does your way of removing an entry remove a NaN too?")


def aggregate(loss_tok, mask, mode, max_len=None):
    x = loss_tok * mask
    n_tok = mask.sum(dim=1)
    n_seq = mask.any(dim=1).sum().clamp_min(1)
    if mode == "token-mean":
        return x.sum() / n_tok.sum().clamp_min(1)
    if mode == "seq-mean-token-mean":
        return (x.sum(dim=1) / n_tok.clamp_min(1)).sum() / n_seq
    if mode == "seq-mean-token-sum":
        return x.sum() / n_seq
    L = loss_tok.shape[1] if max_len is None else max_len
    return x.sum() / n_seq / L
