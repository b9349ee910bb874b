"""Zero the padding with torch.where first (multiplying by the mask would keep NaN: NaN * 0 = NaN),
then every mode is a sum divided by a count. Counts are clamped to at least 1, so an empty row
or an empty batch gives 0 instead of 0/0. "Sequences" are the rows with at least one valid token.
"""
import torch
from torch import Tensor


def aggregate(loss_tok: Tensor, mask: Tensor, mode: str, max_len: int | None = None) -> Tensor:
    x = torch.where(mask, loss_tok, torch.zeros_like(loss_tok))     # [B, T], padding -> 0
    n_tok = mask.sum(dim=1)                                          # [B] |y_i|
    n_seq = mask.any(dim=1).sum().clamp_min(1)                       # non-empty rows
    if mode == "token-mean":
        return x.sum() / n_tok.sum().clamp_min(1)
    if mode == "seq-mean-token-mean":
        return (x.sum(dim=1) / n_tok.clamp_min(1)).sum() / n_seq
    if mode == "seq-mean-token-sum":
        return x.sum(dim=1).sum() / n_seq
    if mode == "seq-mean-token-sum-norm":
        L = loss_tok.shape[1] if max_len is None else max_len
        return x.sum(dim=1).sum() / n_seq / L
    raise ValueError(f"unknown mode {mode!r}")
