"""Policy losses, one short function per algorithm, and a registry the toy trainer reads.

Every loss has the signature

    loss_fn(logp, old_logp, adv, mask, *, <its own knobs>, agg, max_len=None, is_weight=None)
        -> (loss, stats)

``logp`` [B, T] carries the gradient; ``old_logp`` [B, T] and ``adv`` ([B] or [B, T]) are treated
as constants; ``mask`` is bool [B, T]; ``is_weight`` [B, T] is an optional detached TIS/MIS weight
that multiplies the per-token loss. ``loss`` is the scalar to minimise (papers maximise J; we
return -J) and ``stats`` a dict of detached floats named as in ``metrics.METRICS``.

Per-token gradient: d loss / d logp_t = -alpha_t * c(r_t, A_t), with alpha_t the aggregation
weight (``aggregation.token_weights``) and c the coefficient ``grad_coefficient`` measures.
Chapter 05 (ratios and clipping) shows these losses; the toy trainer (chapter 07) trains them.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
from torch import Tensor

from .aggregation import aggregate
from .masking import (check_adv, check_eps, check_number, check_seq_adv, check_token_inputs,
                      masked_mean, zero_padding)
from .ratios import clip_ratio, clip_stats, clipped_surrogate, log_ratio

LossFn = Callable[..., "tuple[Tensor, dict[str, float]]"]
LOSSES: dict[str, LossFn] = {}


def register_loss(name: str):
    """Decorator: add a loss to the registry under ``name``; a second use of a name raises."""
    def deco(fn: LossFn) -> LossFn:
        if name in LOSSES:
            raise KeyError(f"loss {name!r} is already registered")
        LOSSES[name] = fn
        return fn
    return deco


def available_losses() -> list[str]:
    return sorted(LOSSES)


def resolve_loss(name_or_fn: str | LossFn) -> LossFn:
    """A registered name, or any callable with the loss signature (a reader's own function)."""
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn not in LOSSES:
        raise ValueError(f"unknown loss {name_or_fn!r}; available: {available_losses()}")
    return LOSSES[name_or_fn]


@contextlib.contextmanager
def registered(name: str, fn: LossFn) -> Iterator[LossFn]:
    """Register ``fn`` for the duration of a with-block (tests, notebook experiments)."""
    register_loss(name)(fn)
    try:
        yield fn
    finally:
        LOSSES.pop(name, None)


def _prepare(logp, old_logp, adv, mask, is_weight):
    """Validate inputs; return ratio [B, T], detached adv_tok [B, T] and a padding-safe weight."""
    check_token_inputs(mask, logp=logp, old_logp=old_logp, is_weight=is_weight)
    adv_tok = check_adv(adv, mask).detach()                                   # [B, T]
    ratio = torch.exp(log_ratio(logp, old_logp.detach(), mask))               # [B, T]
    weight = None if is_weight is None else zero_padding(is_weight.detach(), mask)
    return ratio, adv_tok, weight


def _check_clip(eps_low, eps_high, dual_clip=None) -> None:
    """A clip range [1 - eps_low, 1 + eps_high] with 0 <= eps_low < 1, and a dual clip c > 1."""
    check_eps(eps_low, "eps_low", upper=1.0)
    check_eps(eps_high, "eps_high")
    check_number(dual_clip, "dual_clip", gt=1, allow_none=True)


def _apply_weight(loss_tok: Tensor, weight: Tensor | None) -> Tensor:
    return loss_tok if weight is None else loss_tok * weight


@register_loss("ppo")
def ppo_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.2, dual_clip=None,
             agg="token-mean", max_len=None, is_weight=None):
    """PPO clipped surrogate per token, -min(r A, clip(r, 1-eps_low, 1+eps_high) A).

    Separate eps_low / eps_high; optional dual clip c > 1 for A < 0 (verl uses c = 3).
    """
    _check_clip(eps_low, eps_high, dual_clip)
    ratio, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    loss_tok = clipped_surrogate(ratio, adv_tok, eps_low, eps_high, dual_clip)   # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    return loss, clip_stats(ratio, adv_tok, mask, eps_low, eps_high)


@register_loss("grpo")
def grpo_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.2, dual_clip=None,
              agg="seq-mean-token-mean", max_len=None, is_weight=None):
    """GRPO (DeepSeekMath): PPO's clip with the sample-level mean (seq-mean-token-mean)."""
    return ppo_loss(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high,
                    dual_clip=dual_clip, agg=agg, max_len=max_len, is_weight=is_weight)


@register_loss("dapo")
def dapo_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.28, dual_clip=None,
              agg="token-mean", max_len=None, is_weight=None):
    """DAPO: GRPO with Clip-Higher (eps_high 0.28 > eps_low 0.2) and the token-level mean.

    DAPO's other two changes live outside the loss: dynamic sampling
    (``advantages.signal_groups``) and the overlong penalty (``rewards.overlong_penalty``).
    """
    return ppo_loss(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high,
                    dual_clip=dual_clip, agg=agg, max_len=max_len, is_weight=is_weight)


@register_loss("dr_grpo")
def dr_grpo_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.2, dual_clip=None,
                 agg="seq-mean-token-sum-norm", max_len=None, is_weight=None):
    """Dr. GRPO: GRPO with a constant normaliser 1/(B L_max) instead of 1/(B |y_i|).

    Its other change is the advantage: pass ``advantages.dr_grpo_advantages`` (no std).
    """
    return ppo_loss(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high,
                    dual_clip=dual_clip, agg=agg, max_len=max_len, is_weight=is_weight)


@register_loss("gspo")
def gspo_loss(logp, old_logp, adv, mask, *, eps_low=3e-4, eps_high=4e-4,
              agg="seq-mean-token-mean", max_len=None, is_weight=None):
    """GSPO (Zheng et al. 2025): one ratio per sequence, s_i = exp(mean_t log r_it), clipped.

    Differs from GRPO in the ratio: the length-normalised geometric mean of the token ratios,
    clipped at sequence level, so a clipped response loses its gradient as a whole.
    adv must be one value per sequence [B]. The gradient flows through s. Each token's log r is
    clamped to +-20 before the mean, so |log s| <= 20 and a clamped token adds no gradient.
    """
    _check_clip(eps_low, eps_high)
    check_token_inputs(mask, logp=logp, old_logp=old_logp, is_weight=is_weight)
    adv = check_seq_adv(adv, mask, "GSPO").detach()                                      # [B]
    seq_log_ratio = masked_mean(log_ratio(logp, old_logp.detach(), mask), mask, dim=-1)   # [B]
    s = torch.exp(seq_log_ratio)                                                         # [B]
    loss_seq = clipped_surrogate(s, adv, eps_low, eps_high)                              # [B]
    loss_tok = loss_seq[:, None].expand(mask.shape)                                      # [B, T]
    weight = None if is_weight is None else zero_padding(is_weight.detach(), mask)
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    rows = mask.any(dim=1)[:, None]                                                      # [B, 1]
    stats = clip_stats(s[:, None], adv[:, None], rows, eps_low, eps_high, prefix="clip_seq")
    return loss, stats


@register_loss("cispo")
def cispo_loss(logp, old_logp, adv, mask, *, eps_low=None, eps_high=0.28,
               agg="token-mean", max_len=None, is_weight=None):
    """CISPO (MiniMax-M1): clip the importance weight, not the objective: -sg(clip(r)) A log pi.

    Differs from PPO here: the clipped ratio is a detached weight on log pi, so a token outside
    the range keeps a bounded gradient instead of none. eps_low=None: no lower bound (the paper;
    verl's example writes clip_ratio_low=10 for the same thing, which is accepted too).
    """
    check_eps(eps_low, "eps_low", allow_none=True)      # >= 1 is allowed: verl's example uses 10
    check_eps(eps_high, "eps_high")
    ratio, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    clipped_weight = clip_ratio(ratio, eps_low, eps_high).detach()           # [B, T]
    loss_tok = -clipped_weight * adv_tok * zero_padding(logp, mask)           # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    return loss, clip_stats(ratio, adv_tok, mask, eps_low, eps_high)


def sapo_gate(ratio: Tensor, tau: Tensor | float) -> Tensor:
    """SAPO's soft gate f(r) = sigmoid(tau (r - 1)) * 4 / tau; f'(1) = 1, so on-policy c = A."""
    return torch.sigmoid(tau * (ratio - 1)) * 4 / tau


@register_loss("sapo")
def sapo_loss(logp, old_logp, adv, mask, *, tau_pos=1.0, tau_neg=1.05,
              agg="seq-mean-token-mean", max_len=None, is_weight=None):
    """SAPO (Gao et al. 2025): a smooth sigmoid gate instead of a hard clip: -f(r) A.

    tau = tau_pos where A > 0, tau_neg elsewhere (asymmetric: negative updates decay faster).
    No clipping, so no token loses its gradient outright; far off-policy tokens fade smoothly.
    """
    check_number(tau_pos, "tau_pos", gt=0)
    check_number(tau_neg, "tau_neg", gt=0)
    ratio, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    tau = torch.where(adv_tok > 0, torch.full_like(ratio, tau_pos), torch.full_like(ratio, tau_neg))
    loss_tok = -sapo_gate(ratio, tau) * adv_tok                               # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    return loss, clip_stats(ratio, adv_tok, mask, None, None)


def grad_coefficient(loss: str | LossFn, ratio, adv: float, **kwargs) -> Tensor:
    """Per-token gradient coefficient c(r, A) of a loss, by autograd. ratio [N] -> c [N].

    Builds N one-token sequences with log r = log(ratio) and advantage ``adv``, aggregates with
    token-mean (alpha = 1/N), and returns c = -N * d loss / d logp, the factor multiplying
    grad log pi(token) in the gradient that is *ascended* (fact sheet §7).
    """
    fn = resolve_loss(loss)
    ratio = torch.as_tensor(ratio, dtype=torch.float64).reshape(-1)
    if (ratio <= 0).any():
        raise ValueError("ratio must be > 0 everywhere")
    N = ratio.numel()
    logp = ratio.log()[:, None].clone().requires_grad_(True)                 # [N, 1]
    old_logp = torch.zeros_like(logp)
    mask = torch.ones(N, 1, dtype=torch.bool)
    adv_seq = torch.full((N,), float(adv), dtype=torch.float64)
    value, _ = fn(logp, old_logp, adv_seq, mask, **{"agg": "token-mean", **kwargs})
    (grad,) = torch.autograd.grad(value, logp)
    return (-N * grad[:, 0]).to(torch.float64)
