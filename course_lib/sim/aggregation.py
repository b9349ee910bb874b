"""Chapter 03's experiments: how much each token and each response is pushed under each
aggregation mode, for one group of responses with given rewards and lengths.

Weights come from ``aggregation.token_weights`` (autograd through the real ``aggregate``) times
the GRPO advantage, so they cannot drift from the loss the trainer minimises.
"""
from __future__ import annotations

import math
import random
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


# Adam and the constant factor: token-mean, Dr. GRPO and the plain sum give every token of a batch
# the same weight up to one factor per batch. Adam divides each coordinate by its running RMS, so a
# factor that is the same on every step cancels (up to eps); a factor that changes from batch to
# batch, gradient clipping (which sees the unscaled norm) and a term with its own normaliser do not.

ADAM_MODES = ("token-mean", "seq-mean-token-sum-norm", "seq-mean-token-sum")


@dataclass(frozen=True)
class ToyBatch:
    """One batch for a linear softmax policy logits = features @ weight.T (weight [V, D]):
    features [B, T, D] float64, tokens [B, T] long, mask [B, T] bool, adv [B] float64 (GRPO)."""
    features: Tensor
    tokens: Tensor
    mask: Tensor
    adv: Tensor


def toy_batches(n_batches: int, *, n_groups: int = 2, group_size: int = 4, dim: int = 4, vocab: int = 6,
                min_len: int = 4, max_len: int = 48, seed: int = 0) -> list[ToyBatch]:
    """``n_batches`` batches of n_groups * group_size responses with lengths in [min_len, max_len].

    Drawn with Python's ``random`` and exact halves (features in {-1.5, -1, ..., 1.5}), so every CPU
    builds the same batches; every group has a right and a wrong answer (rewards 0/1).
    """
    for name, value, low in (("n_batches", n_batches, 1), ("n_groups", n_groups, 1), ("group_size", group_size, 2),
                             ("dim", dim, 1), ("vocab", vocab, 2), ("min_len", min_len, 1)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if not isinstance(max_len, int) or max_len < min_len:
        raise ValueError(f"max_len must be an int >= min_len = {min_len}, got {max_len!r}")
    rng = random.Random(seed)
    B = n_groups * group_size
    batches = []
    for _ in range(n_batches):
        lengths = [rng.randint(min_len, max_len) for _ in range(B)]
        rewards = []
        for _ in range(n_groups):
            group = [float(rng.random() < 0.5) for _ in range(group_size)]
            group[0], group[1] = 1.0, 0.0                                    # a signal in every group
            rewards += group
        T = max(lengths)
        features = torch.tensor([[[rng.randint(-3, 3) / 2 for _ in range(dim)] for _ in range(T)]
                                 for _ in range(B)], dtype=torch.float64)    # [B, T, D]
        tokens = torch.tensor([[rng.randrange(vocab) for _ in range(T)] for _ in range(B)])   # [B, T]
        mask = length_mask(lengths)                                          # [B, T]
        adv = group_advantages(torch.tensor(rewards, dtype=torch.float64), group_size)        # [B]
        batches.append(ToyBatch(features, tokens, mask, adv))
    return batches


def toy_weight(vocab: int = 6, dim: int = 4, seed: int = 1) -> Tensor:
    """A starting weight [V, D] float64 in exact quarters, the same on every CPU."""
    rng = random.Random(seed)
    return torch.tensor([[rng.randint(-2, 2) / 4 for _ in range(dim)] for _ in range(vocab)], dtype=torch.float64)


def toy_logp(weight: Tensor, batch: ToyBatch) -> Tensor:
    """log pi(token) of every position [B, T] under logits = features @ weight.T; 0 on padding."""
    logits = batch.features @ weight.T                                       # [B, T, V]
    logp = torch.log_softmax(logits, dim=-1).gather(-1, batch.tokens[..., None])[..., 0]   # [B, T]
    return torch.where(batch.mask, logp, torch.zeros_like(logp))


def toy_loss(weight: Tensor, batch: ToyBatch, mode: str, *, max_len: int, kl_coef: float = 0.0,
             kl_agg: str | None = None) -> Tensor:
    """On-policy policy-gradient loss aggregate(-A * logp, mode) plus kl_coef * aggregate(k2, kl_agg),
    k2 = (log pi - log pi_ref)^2 / 2 against the uniform reference pi_ref, on the sampled tokens.
    kl_agg=None aggregates the KL with ``mode``, as verl (``loss_agg_mode`` for both) and TRL
    (beta * KL added per token) do."""
    if mode not in AGGREGATIONS:
        raise ValueError(f"mode must be one of {sorted(AGGREGATIONS)}, got {mode!r}")
    logp = toy_logp(weight, batch)                                           # [B, T]
    loss = aggregate(-batch.adv[:, None] * logp, batch.mask, mode, max_len=max_len)
    if kl_coef:
        ref_logp = -math.log(weight.shape[0])                                # uniform reference
        kl_tok = 0.5 * (logp - ref_logp) ** 2                                # k2 per token [B, T]
        loss = loss + kl_coef * aggregate(kl_tok, batch.mask, kl_agg or mode, max_len=max_len)
    return loss


@dataclass(frozen=True)
class AdamRun:
    """Adam on a stream of batches: updates [S, V*D] (the parameter change of each step),
    grad_norms [S] (before clipping) and clipped [S] (whether max_grad_norm bound)."""
    mode: str
    updates: Tensor
    grad_norms: Tensor
    clipped: Tensor


def adam_run(batches: Sequence[ToyBatch], mode: str, weight: Tensor, *, max_len: int, lr: float = 1e-2,
             max_grad_norm: float | None = None, kl_coef: float = 0.0, kl_agg: str | None = None) -> AdamRun:
    """One ``torch.optim.Adam`` step per batch from ``weight`` [V, D] (default betas and eps, float64),
    with ``clip_grad_norm_(max_grad_norm)`` before each step when it is given (verl ``grad_clip``,
    TRL ``max_grad_norm``; both default to 1.0)."""
    if not batches:
        raise ValueError("batches must hold at least one ToyBatch")
    if max_grad_norm is not None and not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0 or None, got {max_grad_norm!r}")
    if not isinstance(weight, Tensor) or weight.dim() != 2:
        raise ValueError(f"weight must be a starting weight [V, D] (toy_weight()), got {weight!r}")
    weight = weight.detach().double().clone()
    weight.requires_grad_(True)
    opt = torch.optim.Adam([weight], lr=lr, foreach=False)
    updates, norms, clipped = [], [], []
    for batch in batches:
        opt.zero_grad()
        toy_loss(weight, batch, mode, max_len=max_len, kl_coef=kl_coef, kl_agg=kl_agg).backward()
        norm = float(weight.grad.norm())
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_([weight], max_grad_norm)
        before = weight.detach().clone()
        opt.step()
        updates.append((weight.detach() - before).flatten())                 # [V*D]
        norms.append(norm)
        clipped.append(max_grad_norm is not None and norm > max_grad_norm)
    return AdamRun(mode, torch.stack(updates), torch.tensor(norms, dtype=torch.float64), torch.tensor(clipped))


def cosine(a: Tensor, b: Tensor) -> float:
    """Cosine of the angle between two flattened tensors (1: the same direction)."""
    a, b = a.flatten().double(), b.flatten().double()
    return float(a @ b / (a.norm() * b.norm()))


@dataclass(frozen=True)
class AdamComparison:
    """One setting of ``adam_comparison``: 1 - cos between the total parameter change under
    token-mean (gap_token_mean) and under the plain sum (gap_sum) and the one under Dr. GRPO, and
    how many steps max_grad_norm bound under each of ADAM_MODES (clipped) and the largest gradient
    norm before clipping under each (max_norms)."""
    setting: str
    gap_token_mean: float
    gap_sum: float
    clipped: tuple[int, int, int]
    max_norms: tuple[float, float, float]


def adam_comparison(*, steps: int = 8, max_len: int = 64, max_grad_norm: float = 1.0, kl_coef: float = 0.05,
                    big_groups: int = 32) -> list[AdamComparison]:
    """Adam on the three equal-weight modes of the same batches (``toy_batches``, 8 responses each,
    ``big_groups`` * 4 in the large-batch row): one step and ``steps`` steps, with and without
    clipping, and one step with a KL term aggregated by the same mode or by its own token mean."""
    small_b = toy_batches(steps)
    big_b = toy_batches(steps, n_groups=big_groups)
    w0 = toy_weight()
    settings = [
        ("one step", small_b[:1], {}),
        (f"one step, max_grad_norm {max_grad_norm:g}", small_b[:1], {"max_grad_norm": max_grad_norm}),
        (f"{steps} steps", small_b, {}),
        (f"{steps} steps, max_grad_norm {max_grad_norm:g}", small_b, {"max_grad_norm": max_grad_norm}),
        (f"{steps} steps, {4 * big_groups} responses a batch", big_b, {}),
        (f"one step, KL x {kl_coef:g} by the same mode", small_b[:1], {"kl_coef": kl_coef}),
        (f"one step, KL x {kl_coef:g} by its own token mean", small_b[:1], {"kl_coef": kl_coef, "kl_agg": "token-mean"}),
    ]
    out = []
    for label, batches, kwargs in settings:
        runs = {m: adam_run(batches, m, w0, max_len=max_len, **kwargs) for m in ADAM_MODES}
        total = {m: r.updates.sum(dim=0) for m, r in runs.items()}            # [V*D]
        ref = total["seq-mean-token-sum-norm"]
        out.append(AdamComparison(label, 1 - cosine(total["token-mean"], ref),
                                  1 - cosine(total["seq-mean-token-sum"], ref),
                                  tuple(int(runs[m].clipped.sum()) for m in ADAM_MODES),
                                  tuple(float(runs[m].grad_norms.max()) for m in ADAM_MODES)))
    return out
