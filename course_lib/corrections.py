"""Train/inference mismatch corrections: TIS weights and MIS masks (fact sheet §6).

The sampler (an inference engine, or stale weights) gives rollout_logp; the trainer recomputes
old_logp for the same tokens. rho = pi_old / pi_rollout, formed in log space. The weight is a
detached multiplier on the per-token policy loss. Chapter 05 and exercise ex09 use this module.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .masking import LOG_RATIO_CLAMP, check_token_inputs, zero_padding

LEVELS = ("token", "sequence")


def _log_rho(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, level: str, cap: float) -> Tensor:
    check_token_inputs(mask, old_logp=old_logp, rollout_logp=rollout_logp)
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    if not isinstance(cap, (int, float)) or isinstance(cap, bool) or not cap > 0:
        raise ValueError(f"cap must be a number > 0, got {cap!r}")
    log_rho = zero_padding(old_logp.detach() - rollout_logp.detach(), mask)     # [B, T]
    if level == "sequence":
        # the product over the response: sum of logs, broadcast back to the row's tokens
        log_rho = log_rho.sum(dim=-1, keepdim=True).expand_as(log_rho)         # [B, T]
    return log_rho.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def tis_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
                level: str = "token") -> Tensor:
    """Truncated IS weight min(rho, cap) [B, T]; 0 on padding; no gradient.

    level="sequence" uses the product of the token ratios over the response for every token.
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
    if kind == "none":
        return None
    if kind not in CORRECTIONS:
        raise ValueError(f"kind must be one of ['mis', 'none', 'tis'], got {kind!r}")
    return CORRECTIONS[kind](old_logp, rollout_logp, mask, cap, level)
