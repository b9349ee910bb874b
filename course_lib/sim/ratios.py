"""Chapter 05: token ratios that drift with noise, and what each clip does to their gradient.

The source chapter's model of a few off-policy gradient steps: every token's log-ratio
log(pi_theta / pi_old) is an independent N(0, sigma^2) draw. ``old_logp`` is 0 and ``logp`` is the
draw, so ``ratios.log_ratio`` returns it unchanged (it is far inside the +-20 clamp).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from .. import ratios
from ..losses import resolve_loss
from ..masking import check_number, masked_mean, masked_sum


@dataclass(frozen=True)
class DriftRow:
    """One (sigma, L) cell of the ratio-drift experiment; shares are fractions of all tokens."""
    sigma: float
    length: int
    outside: float          # ratio outside [1 - eps_low, 1 + eps_high], whatever the sign of A
    binding: float          # the clip binds: A > 0 above the range or A < 0 below it (no gradient)
    product_min: float      # prod_t r_t over a response: the exact sequence-level IS weight
    product_max: float
    geo_min: float          # GSPO's s_i = exp(mean_t log r_t), the length-normalised ratio
    geo_max: float


def alternating_advantages(n: int) -> Tensor:
    """+1, -1, +1, ... [n]: half the responses above their group's mean, half below."""
    return 1.0 - 2.0 * (torch.arange(n) % 2).float()


def ratio_drift(sigmas: Sequence[float] = (0.02, 0.2), lengths: Sequence[int] = (100, 1000, 4000),
                n: int = 512, seed: int = 0, eps_low: float = 0.2,
                eps_high: float = 0.28) -> list[DriftRow]:
    """The source chapter's experiment, draw for draw: sigma outer loop, L inner, one generator.

    Each cell draws ``n`` responses of L tokens, log r ~ N(0, sigma^2) [n, L]; advantages alternate
    +1 / -1 by response (they are not drawn, so the draws match the source's exactly).
    """
    gen = torch.Generator().manual_seed(seed)
    adv = alternating_advantages(n)                                       # [n]
    rows = []
    for sigma in sigmas:
        for L in lengths:
            logp = torch.randn(n, L, generator=gen) * sigma               # [n, L]
            mask = torch.ones(n, L, dtype=torch.bool)
            log_r = ratios.log_ratio(logp, torch.zeros_like(logp), mask)  # [n, L]
            stats = ratios.clip_stats(log_r.exp(), adv[:, None].expand(n, L), mask, eps_low, eps_high)
            product = masked_sum(log_r, mask, dim=-1).exp()               # [n]
            geo = masked_mean(log_r, mask, dim=-1).exp()                  # [n]
            rows.append(DriftRow(sigma, L, stats["ratio/outside_frac"],
                                 stats["clip/low_frac"] + stats["clip/high_frac"],
                                 float(product.min()), float(product.max()),
                                 float(geo.min()), float(geo.max())))
    return rows


def simulated_batch(n: int = 512, min_len: int = 100, max_len: int = 2000,
                    seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """Standard-normal token noise z [n, max_len], mask [n, max_len] (lengths uniform in
    [min_len, max_len]) and alternating advantages [n]. Scale z by sigma for a noise level, so
    every sigma sees the same responses and the same directions of drift."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=gen)   # [n]
    z = torch.randn(n, max_len, generator=gen)                            # [n, T]
    mask = torch.arange(max_len)[None, :] < lengths[:, None]              # [n, T]
    return z, mask, alternating_advantages(n)


def token_gradients(loss, logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
                    **knobs) -> Tensor:
    """d loss / d logp [B, T] of a registered loss (or any loss callable), by autograd."""
    logp = logp.detach().clone().requires_grad_(True)
    value, _ = resolve_loss(loss)(logp, old_logp, adv, mask, **knobs)
    (grad,) = torch.autograd.grad(value, logp)
    return grad


def dropped_shares(loss, logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
                   **knobs) -> tuple[float, float]:
    """(share of valid tokens whose gradient is exactly 0, share of non-empty responses whose every
    token's gradient is 0), read off the loss's real gradient rather than restated from its formula."""
    dead = (token_gradients(loss, logp, old_logp, adv, mask, **knobs) == 0) & mask   # [B, T]
    rows = mask.any(dim=1)                                                           # [B]
    all_dead = (dead | ~mask).all(dim=1) & rows                                      # [B]
    return float(dead.sum() / mask.sum()), float(all_dead.sum() / rows.sum())


@dataclass(frozen=True)
class NoiseRow:
    """Token- vs sequence-level clipping at one noise level, on the same simulated batch."""
    sigma: float
    token_outside: float     # tokens outside [1 - eps_low, 1 + eps_high] (either sign of A)
    token_dropped: float     # tokens with zero gradient under token-level clipping (DAPO)
    gspo_seq_dropped: float  # responses GSPO drops whole
    gspo_tok_dropped: float  # their tokens, as a share of all tokens
    cispo_dropped: float     # tokens with zero gradient under CISPO (none: it clips the weight)


def clipping_vs_noise(sigmas: Sequence[float], z: Tensor, mask: Tensor, adv: Tensor, *,
                      token_eps: tuple[float, float] = (0.2, 0.28),
                      gspo_eps: tuple[float, float] = (3e-4, 4e-4)) -> list[NoiseRow]:
    """For each sigma, log r = sigma z on the batch of ``simulated_batch``; shares measured from each
    loss's gradient (DAPO token clip, GSPO sequence clip, CISPO with no lower bound)."""
    rows = []
    for sigma in sigmas:
        logp = sigma * z                                                  # [B, T]
        old_logp = torch.zeros_like(logp)
        ratio = ratios.log_ratio(logp, old_logp, mask).exp()              # [B, T]
        adv_tok = adv[:, None].expand(mask.shape)
        outside = ratios.clip_stats(ratio, adv_tok, mask, *token_eps)["ratio/outside_frac"]
        tok, _ = dropped_shares("dapo", logp, old_logp, adv, mask,
                                eps_low=token_eps[0], eps_high=token_eps[1])
        g_tok, g_seq = dropped_shares("gspo", logp, old_logp, adv, mask,
                                      eps_low=gspo_eps[0], eps_high=gspo_eps[1])
        c_tok, _ = dropped_shares("cispo", logp, old_logp, adv, mask, eps_high=token_eps[1])
        rows.append(NoiseRow(float(sigma), outside, tok, g_seq, g_tok, c_tok))
    return rows


@dataclass(frozen=True)
class KeptRange:
    """Where one rule keeps more than ``keep`` of the on-policy-shaped gradient r A, for one sign of A."""
    rule: str
    sign: int                # +1 for A > 0, -1 for A < 0
    lo: float                # the weight c / (r A) exceeds ``keep`` for lo < r < hi (lo = 0: every r > 0)
    hi: float                # math.inf: no upper end


def sapo_half_width(tau: float, keep: float = 0.5) -> float:
    """d with SAPO's weight 4 s (1 - s) = sech^2(tau (r - 1) / 2) > keep exactly for |r - 1| < d."""
    check_number(tau, "tau", gt=0)
    if not 0 < keep < 1:
        raise ValueError(f"keep must be in (0, 1), got {keep!r}")
    return 2.0 * math.acosh(1.0 / math.sqrt(keep)) / tau


def kept_gradient_ranges(eps_low: float = 0.2, eps_high: float = 0.2, tau_pos: float = 1.0,
                         tau_neg: float = 1.05, keep: float = 0.5) -> list[KeptRange]:
    """PPO's clip and SAPO's gate on one axis: the ratios at which each keeps more than ``keep`` of r A.

    The clip keeps all of it on one side and none past its bound (A > 0: r <= 1 + eps_high; A < 0:
    r >= 1 - eps_low); SAPO's weight is a smooth bump around r = 1 of half width ``sapo_half_width``.
    Closed forms in float64, so every machine prints the same digits.
    """
    lo, hi = ratios.clip_bounds(eps_low, eps_high)
    rows = [KeptRange(f"clip {eps_low:g}/{eps_high:g}", +1, 0.0, hi),
            KeptRange(f"clip {eps_low:g}/{eps_high:g}", -1, lo, math.inf)]
    for sign, tau in ((+1, tau_pos), (-1, tau_neg)):
        d = sapo_half_width(tau, keep)
        rows.append(KeptRange(f"SAPO tau={tau:g}", sign, max(0.0, 1.0 - d), 1.0 + d))
    return rows


def sapo_weight_at_zero(tau: float) -> float:
    """SAPO's weight as r -> 0, sech^2(tau / 2): the least it keeps anywhere on 0 < r <= 1."""
    check_number(tau, "tau", gt=0)
    return 1.0 / math.cosh(tau / 2.0) ** 2
