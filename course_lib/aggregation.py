"""Loss aggregation: per-token loss [B, T] + mask -> the scalar that is minimised.

The four modes differ only in the weight alpha each valid token gets (fact sheet §2):

    token-mean               alpha = 1 / sum_j |y_j|           (DAPO; verl and TRL default)
    seq-mean-token-mean      alpha = 1 / (B |y_i|)             (original GRPO)
    seq-mean-token-sum       alpha = 1 / B
    seq-mean-token-sum-norm  alpha = 1 / (B L_max)             (Dr. GRPO; L_max = max_len or T)

"B" counts non-empty sequences: a fully masked row contributes nothing and is not counted.
verl 0.9.1 adds a fifth, ``token-sum`` (alpha = 1: the loss grows with the batch), accepted by
``aggregate`` and ``token_weights`` but kept out of AGGREGATIONS, the four chapter 03 compares.
Chapter 03 (loss aggregation) and exercise ex03; also used in chapters 02 and 07.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .masking import check_choice, check_int, check_mask, check_tensor, masked_mean, masked_sum


def _n_seqs(mask: Tensor) -> Tensor:
    return mask.any(dim=1).sum().clamp_min(1)                   # non-empty rows, at least 1


def token_mean(loss_tok: Tensor, mask: Tensor, max_len: int | None = None) -> Tensor:
    """Mean over all valid tokens of the batch (DAPO's token-level loss)."""
    return masked_mean(loss_tok, mask)


def seq_mean_token_mean(loss_tok: Tensor, mask: Tensor, max_len: int | None = None) -> Tensor:
    """Mean over tokens within each sequence, then over sequences (GRPO's sample-level loss)."""
    seq_loss = masked_mean(loss_tok, mask, dim=-1)              # [B]
    return seq_loss.sum() / _n_seqs(mask)


def seq_mean_token_sum(loss_tok: Tensor, mask: Tensor, max_len: int | None = None) -> Tensor:
    """Sum over tokens within each sequence, then mean over sequences."""
    seq_loss = masked_sum(loss_tok, mask, dim=-1)               # [B]
    return seq_loss.sum() / _n_seqs(mask)


def seq_mean_token_sum_norm(loss_tok: Tensor, mask: Tensor, max_len: int | None = None) -> Tensor:
    """Each sequence's token sum divided by a constant L_max, then mean over sequences (Dr. GRPO).

    L_max is ``max_len`` (the generation budget) or, when None, the padded length T.
    """
    L = loss_tok.shape[-1] if max_len is None else max_len
    return seq_mean_token_sum(loss_tok, mask) / L


def token_sum(loss_tok: Tensor, mask: Tensor, max_len: int | None = None) -> Tensor:
    """Sum over all valid tokens, unnormalised (verl 0.9.1 ``token-sum``, agg_loss).

    Differs from token-mean in the normaliser: none, so the loss and its gradient scale with the
    number of tokens in the batch (verl multiplies by the data-parallel size so that the averaged
    gradient is the global sum).
    """
    return masked_sum(loss_tok, mask)


AGGREGATIONS: dict[str, Callable[..., Tensor]] = {
    "token-mean": token_mean,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum": seq_mean_token_sum,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
}
MODES: dict[str, Callable[..., Tensor]] = {**AGGREGATIONS, "token-sum": token_sum}   # every mode


def _check_mode(mode, max_len) -> None:
    check_choice(mode, "mode", sorted(MODES))
    check_int(max_len, "max_len", allow_none=True)


def aggregate(loss_tok: Tensor, mask: Tensor, mode: str = "token-mean",
              max_len: int | None = None) -> Tensor:
    """Reduce a per-token loss [B, T] to a scalar with one of the modes (see module doc)."""
    check_tensor(loss_tok, "loss_tok", ndim=2, floating=True)
    check_mask(mask, loss_tok, "loss_tok")
    _check_mode(mode, max_len)
    return MODES[mode](loss_tok, mask, max_len)


def token_weights(mask: Tensor, mode: str = "token-mean", max_len: int | None = None) -> Tensor:
    """The weight alpha [B, T] each token gets: aggregate(x, mask, mode) == (alpha * x).sum().

    Computed by autograd through ``aggregate`` itself, so it can never disagree with it.
    """
    check_tensor(mask, "mask", ndim=2)
    _check_mode(mode, max_len)
    x = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    (alpha,) = torch.autograd.grad(aggregate(x, mask, mode, max_len), x)
    return alpha                                                # [B, T], 0 on padding
