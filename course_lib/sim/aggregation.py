"""Chapter 03's experiments: how much each token and each response is pushed under each
aggregation mode, for one group of responses with given rewards and lengths.

Weights come from ``aggregation.token_weights`` (autograd through the real ``aggregate``) times
the GRPO advantage, so they cannot drift from the loss the trainer minimises.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from ..advantages import group_advantages
from ..aggregation import AGGREGATIONS, aggregate, token_weights

MODES = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm", "seq-mean-token-sum")


def length_mask(lengths: Sequence[int] | Tensor, width: int | None = None) -> Tensor:
    """Right-padded response mask. lengths [B] -> mask bool [B, T], T = width or max(lengths)."""
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.is_floating_point() or bool((lengths < 1).any()):
        raise ValueError(f"lengths must be a 1-d sequence of ints >= 1, got {lengths.tolist()!r}")
    T = int(lengths.max()) if width is None else width
    if T < int(lengths.max()):
        raise ValueError(f"width must be >= the longest length {int(lengths.max())}, got {width}")
    return torch.arange(T)[None, :] < lengths[:, None]                      # [B, T]


@dataclass(frozen=True)
class ResponseWeights:
    """One group under one aggregation mode: adv [B], per_token [B] (every token of a response
    gets the same weight in all four modes) and whole [B] = per_token * length."""
    mode: str
    adv: Tensor
    per_token: Tensor
    whole: Tensor


def response_weights(rewards: Sequence[float], lengths: Sequence[int], mode: str,
                     max_len: int | None = None) -> ResponseWeights:
    """Signed gradient weight per token and per response of ONE group (G = len(rewards)).

    The weight of token t of response i is d loss / d (A_i * logp_{i,t}) with loss the aggregated
    -A * logp: alpha_{i,t} * A_i. ``max_len`` is Dr. GRPO's constant L_max (None: longest length).
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"mode must be one of {sorted(AGGREGATIONS)}, got {mode!r}")
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    if rewards.dim() != 1 or rewards.numel() != len(lengths) or rewards.numel() < 2:
        raise ValueError(f"rewards and lengths must be two lists of the same length >= 2, "
                         f"got {len(rewards)} and {len(lengths)}")
    mask = length_mask(lengths)                                              # [B, T]
    adv = group_advantages(rewards, rewards.numel()).double()                # [B]
    alpha = token_weights(mask, mode, max_len)                               # [B, T]
    per_token = alpha[:, 0] * adv                                            # [B]
    whole = alpha.sum(dim=1) * adv                                           # [B]
    return ResponseWeights(mode, adv, per_token, whole)


def length_sweep(rewards: Sequence[float], lengths: Sequence[int], index: int,
                 sweep: Sequence[int], mode: str, max_len: int | None = None) -> tuple[Tensor, Tensor]:
    """Weight per token and per response of response ``index`` as its length runs over ``sweep``,
    the other responses fixed. -> (per_token [S], whole [S])."""
    per_token, whole = [], []
    for n in sweep:
        lens = list(lengths)
        lens[index] = int(n)
        w = response_weights(rewards, lens, mode, max_len)
        per_token.append(w.per_token[index])
        whole.append(w.whole[index])
    return torch.stack(per_token), torch.stack(whole)


def rlhf_book_gradients(include_advantage: bool = True) -> dict[str, tuple[float, float]]:
    """The rlhf-book's aggregation example (ch. 6): d loss / d ratio for one token of the short
    (4 tokens) and the long (7 tokens) sequence, ratio = 1, advantage 2, L_max = 7.

    ``include_advantage=False`` reproduces the book's token-level line, which averages ``ratio``
    instead of ``ratio * advs`` (fact sheet §2.1). The loss here is the maximised objective, as in
    the book, so the gradients are positive.
    """
    mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [1] * 7], dtype=torch.bool)   # [2, 7]
    advs = torch.full((2, 7), 2.0, dtype=torch.float64)
    out = {}
    for mode in MODES:
        ratio = torch.ones(2, 7, dtype=torch.float64, requires_grad=True)
        objective = ratio * advs if include_advantage else ratio
        (grad,) = torch.autograd.grad(aggregate(objective, mask, mode, max_len=7), ratio)
        out[mode] = (float(grad[0, 0]), float(grad[1, 0]))
    return out
