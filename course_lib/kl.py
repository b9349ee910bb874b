"""KL divergence: per-token estimators, the exact categorical KL, the adaptive KL controller.

Estimators (Schulman, "Approximating KL Divergence", 2020). Tokens are sampled from the policy
pi (the sampler), and each estimator estimates the *reverse* KL(pi || pi_ref) with
log_r = log pi_ref - log pi (the log of r = pi_ref / pi):

    k1 = -log_r                     unbiased, high variance, negative for about half the tokens
    k2 = log_r^2 / 2                biased, non-negative, low variance
    k3 = (r - 1) - log_r            unbiased, non-negative, low variance (GRPO's choice)

Used as a *loss* (differentiated with the token held fixed), the expected gradients differ from
what the values estimate: k1 -> 0, k2 -> grad KL(pi || pi_ref), k3 -> grad KL(pi_ref || pi), the
forward KL (fact sheet §5.2). Chapter 03 and exercise ex04 use this module.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .masking import LOG_RATIO_CLAMP, check_tensor, check_token_inputs, zero_padding


def _log_r(logp: Tensor, ref_logp: Tensor, mask: Tensor | None) -> Tensor:
    """log(pi_ref / pi) [B, T]; 0 on padding when a mask is given (so exp never sees padding)."""
    if mask is None:
        for name, x in (("logp", logp), ("ref_logp", ref_logp)):
            if not isinstance(x, Tensor) or not x.is_floating_point():
                raise ValueError(f"{name} must be a floating-point torch.Tensor, got {type(x).__name__}")
        if logp.shape != ref_logp.shape:
            raise ValueError(f"ref_logp must have the shape of logp {tuple(logp.shape)}, "
                             f"got {tuple(ref_logp.shape)}")
        log_r = ref_logp - logp
    else:
        check_token_inputs(mask, logp=logp, ref_logp=ref_logp)
        log_r = zero_padding(ref_logp - logp, mask)
    return log_r.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


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
    if kind not in KL_ESTIMATORS:
        raise ValueError(f"kind must be one of {sorted(KL_ESTIMATORS)}, got {kind!r}")
    return KL_ESTIMATORS[kind](logp, ref_logp, mask)


def categorical_kl(logp_p: Tensor, logp_q: Tensor) -> Tensor:
    """Exact KL(p || q) = sum_x p(x) (log p(x) - log q(x)) over the last dim. [..., V] -> [...]."""
    check_tensor(logp_p, "logp_p", floating=True)
    check_tensor(logp_q, "logp_q", floating=True)
    if logp_p.shape != logp_q.shape:
        raise ValueError(f"logp_q must have the shape of logp_p {tuple(logp_p.shape)}, "
                         f"got {tuple(logp_q.shape)}")
    return (logp_p.exp() * (logp_p - logp_q)).sum(-1)


def adaptive_kl_update(beta: float, current_kl: float, target_kl: float, n_steps: int,
                       horizon: int) -> float:
    """One step of Ziegler et al.'s adaptive KL controller (arXiv 1909.08593). Returns the new beta.

    e = clip(current_kl / target_kl - 1, -0.2, 0.2);  beta <- beta * (1 + e * n_steps / horizon).
    KL above target raises beta, below lowers it; the clip bounds how fast either happens.
    """
    for name, v in (("beta", beta), ("target_kl", target_kl)):
        if not isinstance(v, (int, float)) or v <= 0:
            raise ValueError(f"{name} must be a number > 0, got {v!r}")
    if isinstance(current_kl, bool) or not isinstance(current_kl, (int, float)) or current_kl != current_kl:
        raise ValueError(f"current_kl must be a number (not NaN), got {current_kl!r}")
    for name, v in (("n_steps", n_steps), ("horizon", horizon)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    error = min(max(current_kl / target_kl - 1.0, -0.2), 0.2)
    return float(beta * (1.0 + error * n_steps / horizon))
