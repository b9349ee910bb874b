"""KL divergence: per-token estimators, the exact categorical KL, the adaptive KL controller.

Estimators (Schulman, "Approximating KL Divergence", 2020). Tokens are sampled from the policy
pi (the sampler), and each estimator estimates the *reverse* KL(pi || pi_ref) with
log_r = log pi_ref - log pi (the log of r = pi_ref / pi):

    k1 = -log_r                     unbiased, high variance, negative for about half the tokens
    k2 = log_r^2 / 2                biased, non-negative, low variance
    k3 = (r - 1) - log_r            unbiased, non-negative, low variance (GRPO's choice)

Used as a *loss* (differentiated with the token held fixed), the expected gradients differ from
what the values estimate: k1 -> 0, k2 -> grad KL(pi || pi_ref), k3 -> grad KL(pi_ref || pi), the
forward KL (fact sheet §5.2). Chapter 04 (KL estimators) and exercises ex04 and ex12 use
this module; the toy trainer (chapter 07) adds beta * aggregate(kl_estimate(...)) to its loss.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .masking import (check_choice, check_int, check_number, check_same_shape, check_token_inputs,
                      clamped_log_ratio)


def _log_r(logp: Tensor, ref_logp: Tensor, mask: Tensor | None) -> Tensor:
    """log(pi_ref / pi), clamped to +-20; 0 on padding when a mask is given (exp never sees it)."""
    if mask is None:
        check_same_shape(logp=logp, ref_logp=ref_logp)
    else:
        check_token_inputs(mask, logp=logp, ref_logp=ref_logp)
    return clamped_log_ratio(ref_logp, logp, mask)


def kl_k1(logp: Tensor, ref_logp: Tensor, mask: Tensor | None = None) -> Tensor:
    """k1 estimate of KL(pi || pi_ref) per token, tokens sampled from pi. [B, T] -> [B, T]."""
    return -_log_r(logp, ref_logp, mask)


def kl_k2(logp: Tensor, ref_logp: Tensor, mask: Tensor | None = None) -> Tensor:
    """k2 estimate of KL(pi || pi_ref) per token, tokens sampled from pi: (log r)^2 / 2."""
    return 0.5 * _log_r(logp, ref_logp, mask) ** 2


def kl_k3(logp: Tensor, ref_logp: Tensor, mask: Tensor | None = None) -> Tensor:
    """k3 estimate of KL(pi || pi_ref) per token, tokens sampled from pi: (r - 1) - log r.

    Written with expm1 so that tiny log-ratios do not lose their digits to cancellation.
    """
    log_r = _log_r(logp, ref_logp, mask)
    return torch.expm1(log_r) - log_r


KL_ESTIMATORS: dict[str, Callable[..., Tensor]] = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


def kl_estimate(logp: Tensor, ref_logp: Tensor, mask: Tensor | None = None, kind: str = "k3") -> Tensor:
    """Dispatch to k1 / k2 / k3 by name."""
    check_choice(kind, "kind", sorted(KL_ESTIMATORS))
    return KL_ESTIMATORS[kind](logp, ref_logp, mask)


def categorical_kl(logp_p: Tensor, logp_q: Tensor) -> Tensor:
    """Exact KL(p || q) = sum_x p(x) (log p(x) - log q(x)) over the last dim. [..., V] -> [...]."""
    check_same_shape(logp_p=logp_p, logp_q=logp_q)
    return (logp_p.exp() * (logp_p - logp_q)).sum(-1)


def adaptive_kl_update(beta: float, current_kl: float, target_kl: float, n_steps: int,
                       horizon: int) -> float:
    """One step of Ziegler et al.'s adaptive KL controller (arXiv 1909.08593). Returns the new beta.

    e = clip(current_kl / target_kl - 1, -0.2, 0.2);  beta <- beta * (1 + e * n_steps / horizon).
    KL above target raises beta, below lowers it; the clip bounds how fast either happens.
    """
    check_number(beta, "beta", gt=0)
    check_number(target_kl, "target_kl", gt=0)
    check_number(current_kl, "current_kl")
    check_int(n_steps, "n_steps")
    check_int(horizon, "horizon")
    error = min(max(current_kl / target_kl - 1.0, -0.2), 0.2)
    return float(beta * (1.0 + error * n_steps / horizon))
