"""Train/inference mismatch corrections: TIS weights and MIS masks (fact sheet §6).

The sampler (an inference engine, or stale weights) gives rollout_logp; the trainer recomputes
old_logp for the same tokens. rho = pi_old / pi_rollout, formed in log space and clamped to
|log rho| <= 20 before exp. The weight is a detached multiplier on the per-token policy loss.
Chapter 06 (train/inference mismatch) and exercise ex09 use this module; so does the toy
trainer (chapter 07).

At sequence level rho is the product of the response's token ratios: its log, the sum of the
token log-ratios, is clamped once, after summing. A response with log rho > 20 gets rho = e^20
(TIS: the cap; MIS: dropped); one with log rho < -20 gets e^-20 ~ 2e-9, not 0.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .masking import check_choice, check_number, check_token_inputs, clamped_log_ratio

LEVELS = ("token", "sequence")


def _log_rho(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, level: str, cap: float) -> Tensor:
    """Validate; log rho [B, T], per token or (sequence level) the row's sum on every token."""
    check_token_inputs(mask, old_logp=old_logp, rollout_logp=rollout_logp)
    check_choice(level, "level", LEVELS)
    check_number(cap, "cap", gt=0)
    return clamped_log_ratio(old_logp.detach(), rollout_logp.detach(), mask,
                             per_sequence=(level == "sequence"))                 # [B, T]


def tis_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
                level: str = "token") -> Tensor:
    """Truncated IS weight min(rho, cap) [B, T]; 0 on padding; no gradient.

    level="sequence" uses the product of the token ratios over the response for every token
    (its log clamped to +-20 after summing: see the module docstring).
    """
    rho = torch.exp(_log_rho(old_logp, rollout_logp, mask, level, cap))
    return torch.where(mask, rho.clamp(max=cap), torch.zeros_like(rho))


def mis_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
                level: str = "token") -> Tensor:
    """Masked IS weight rho * 1[rho <= cap] [B, T]; 0 on padding; no gradient.

    Differs from TIS in one place: a ratio above the cap drops the token (or, at sequence level,
    the whole response) instead of being truncated.
    """
    rho = torch.exp(_log_rho(old_logp, rollout_logp, mask, level, cap))
    return torch.where(mask & (rho <= cap), rho, torch.zeros_like(rho))


CORRECTIONS = {"tis": tis_weights, "mis": mis_weights}


def correction_weights(kind: str, old_logp: Tensor, rollout_logp: Tensor, mask: Tensor,
                       cap: float = 2.0, level: str = "token") -> Tensor | None:
    """Dispatch by name: "none" -> None, "tis" / "mis" -> weights [B, T]."""
    check_choice(kind, "kind", sorted([*CORRECTIONS, "none"]))
    if kind == "none":
        return None
    return CORRECTIONS[kind](old_logp, rollout_logp, mask, cap, level)
