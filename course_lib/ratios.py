"""Importance ratios and the clipped surrogate: the pieces every policy loss shares.

Used by ``losses``; shown in chapter 05 (ratios and clipping) and used by the toy trainer (07).
"""
from __future__ import annotations

import contextlib
import contextvars

import torch
from torch import Tensor

from .masking import clamped_log_ratio, masked_mean


_TENSOR_STATS = contextvars.ContextVar("tensor_stats", default=False)


@contextlib.contextmanager
def tensor_stats():
    """Inside the block the losses' statistics are detached 0-dim tensors instead of floats, so a
    loss call copies nothing back from the device; the toy trainer reads a step's metrics back in
    one copy. Outside it (chapters, tests, the judge) they are floats."""
    token = _TENSOR_STATS.set(True)
    try:
        yield
    finally:
        _TENSOR_STATS.reset(token)


def stat(x: Tensor) -> "float | Tensor":
    """A statistic as a float, or as a detached 0-dim tensor inside ``tensor_stats()``."""
    x = x.detach()
    return x if _TENSOR_STATS.get() else float(x)


def log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """log(pi_theta / pi_old) per token [B, T]; 0 on padding, clamped to +-20 before any exp."""
    return clamped_log_ratio(logp, old_logp, mask)


def clip_bounds(eps_low: float | None, eps_high: float | None) -> tuple[float, float]:
    """[1 - eps_low, 1 + eps_high]; a None side is unbounded (0 below, inf above)."""
    lo = 0.0 if eps_low is None else max(1.0 - eps_low, 0.0)
    hi = float("inf") if eps_high is None else 1.0 + eps_high
    return lo, hi


def clip_ratio(ratio: Tensor, eps_low: float | None, eps_high: float | None) -> Tensor:
    """clip(r, 1 - eps_low, 1 + eps_high), a None side unbounded. [...] -> [...]."""
    return ratio.clamp(*clip_bounds(eps_low, eps_high))


def clipped_surrogate(ratio: Tensor, adv_tok: Tensor, eps_low: float, eps_high: float,
                      dual_clip: float | None = None) -> Tensor:
    """PPO's per-token loss -min(r A, clip(r, 1-eps_low, 1+eps_high) A). [B, T] -> [B, T].

    paper maximises J = min(...); we return -J. With ``dual_clip`` = c > 1 (Ye et al. 2019, always
    on in verl with c = 3), a token with A < 0 has its loss capped at -c A.
    """
    loss_tok = torch.maximum(-adv_tok * ratio, -adv_tok * clip_ratio(ratio, eps_low, eps_high))
    if dual_clip is not None:
        capped = torch.minimum(loss_tok, -adv_tok * dual_clip)
        loss_tok = torch.where(adv_tok < 0, capped, loss_tok)
    return loss_tok


@torch.no_grad()
def clip_stats(ratio: Tensor, adv_tok: Tensor, mask: Tensor, eps_low: float | None,
               eps_high: float | None, prefix: str = "clip") -> dict:
    """Detached statistics of a ratio tensor [B, T] over valid tokens (metrics glossary keys).

    ``clip/low_frac``: A < 0 and r < 1 - eps_low (the lower clip binds: no gradient under PPO,
    a gradient weighted by the clipped ratio under CISPO);
    ``clip/high_frac``: A > 0 and r > 1 + eps_high (the upper clip binds, likewise);
    ``ratio/outside_frac``: r outside the range whatever the sign of A (cleanrl's clipfrac).
    Floats, or 0-dim tensors inside ``tensor_stats()``.
    """
    lo, hi = clip_bounds(eps_low, eps_high)
    below, above = (ratio < lo) & mask, (ratio > hi) & mask
    r_valid = torch.where(mask, ratio, torch.full_like(ratio, float("-inf")))
    return {
        f"{prefix}/low_frac": stat(masked_mean((below & (adv_tok < 0)).float(), mask)),
        f"{prefix}/high_frac": stat(masked_mean((above & (adv_tok > 0)).float(), mask)),
        "ratio/outside_frac": stat(masked_mean((below | above).float(), mask)),
        "ratio/mean": stat(masked_mean(ratio, mask)),
        # a ratio is > 0, so clamping at 0 changes nothing but the max of no valid token (-inf)
        "ratio/max": stat(r_valid.max().clamp_min(0.0) if r_valid.numel() else ratio.new_zeros(())),
    }
