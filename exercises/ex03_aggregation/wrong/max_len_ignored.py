"""Known-wrong: seq-mean-token-sum-norm always divides by T, ignoring max_len."""
import torch

HINT = ("In seq-mean-token-sum-norm your result is right when max_len is None but wrong when it is given. "
        "Check where your constant comes from in each case: what should it be when the caller provides a "
        "generation budget?")


def aggregate(loss_tok, mask, mode, max_len=None):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    n_tok = mask.sum(dim=1)
    n_seq = mask.any(dim=1).sum().clamp_min(1)
    if mode == "token-mean":
        return x.sum() / n_tok.sum().clamp_min(1)
    if mode == "seq-mean-token-mean":
        return (x.sum(dim=1) / n_tok.clamp_min(1)).sum() / n_seq
    if mode == "seq-mean-token-sum":
        return x.sum() / n_seq
    return x.sum() / n_seq / loss_tok.shape[1]
