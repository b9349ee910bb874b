"""Known-wrong: seq-mean-token-sum-norm divides each row by its own length."""
import torch

HINT = ("In seq-mean-token-sum-norm your normaliser varies from one response to the next. Check what your "
        "normaliser depends on: the point of Dr. GRPO's mode is a single constant for every response, "
        "whatever its length.")


def aggregate(loss_tok, mask, mode, max_len=None):
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))
    n_tok = mask.sum(dim=1)
    n_seq = mask.any(dim=1).sum().clamp_min(1)
    if mode == "token-mean":
        return x.sum() / n_tok.sum().clamp_min(1)
    if mode in ("seq-mean-token-mean", "seq-mean-token-sum-norm"):
        return (x.sum(dim=1) / n_tok.clamp_min(1)).sum() / n_seq
    return x.sum() / n_seq
