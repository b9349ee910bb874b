"""Policy losses, one short function per algorithm, and a registry the toy trainer reads.

Every loss has the signature

    loss_fn(logp, old_logp, adv, mask, *, <its own knobs>, agg, max_len=None, is_weight=None)
        -> (loss, stats)

``logp`` [B, T] carries the gradient; ``old_logp`` [B, T] and ``adv`` ([B] or [B, T]) are treated
as constants; ``mask`` is bool [B, T]; ``is_weight`` [B, T] is an optional detached TIS/MIS weight
that multiplies the per-token loss. ``loss`` is the scalar to minimise (papers maximise J; we
return -J) and ``stats`` a dict of detached floats named as in ``metrics.METRICS`` (0-dim tensors
inside ``ratios.tensor_stats()``, which the toy trainer uses).

Per-token gradient: d loss / d logp_t = -alpha_t * c(r_t, A_t), with alpha_t the aggregation
weight (``aggregation.token_weights``) and c the coefficient ``grad_coefficient`` measures.
Chapter 05 (ratios and clipping) shows these losses; the toy trainer (chapter 07) trains them.
FRAMEWORK_LOSSES holds the other losses verl 0.9.1 and TRL 1.16.0 select (GPG, DPPO, GMPO, LUSPO,
VESPO, DRO, Clip-Cov, KL-Cov), each a diff of a parent above, checked against the frameworks' own
code in tests/peers/test_verl_functions.py.
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator

import torch
from torch import Tensor

from .aggregation import aggregate
from .masking import (LOG_RATIO_CLAMP, check_adv, check_eps, check_number, check_seq_adv,
                      check_token_inputs, masked_mean, masked_sum, zero_padding)
from .ratios import clip_ratio, clip_stats, clipped_surrogate, log_ratio, stat

LossFn = Callable[..., "tuple[Tensor, dict[str, float]]"]
LOSSES: dict[str, LossFn] = {}
# The other policy losses verl 0.9.1 and TRL 1.16.0 can select, with the same signature. They are kept
# out of LOSSES, which chapters 01, 02 and 07 iterate (07 trains every entry), until those chapters show
# them; resolve_loss finds both, so the toy trainer runs any of them by name.
FRAMEWORK_LOSSES: dict[str, LossFn] = {}


def register_loss(name: str, registry: dict[str, LossFn] | None = None):
    """Decorator: add a loss to ``registry`` (LOSSES by default) under ``name``; a name already in
    either registry raises."""
    target = LOSSES if registry is None else registry

    def deco(fn: LossFn) -> LossFn:
        if name in LOSSES or name in FRAMEWORK_LOSSES:
            raise KeyError(f"loss {name!r} is already registered")
        target[name] = fn
        return fn
    return deco


def available_losses() -> list[str]:
    return sorted(LOSSES)


def framework_losses() -> list[str]:
    return sorted(FRAMEWORK_LOSSES)


def resolve_loss(name_or_fn: str | LossFn) -> LossFn:
    """A registered name, or any callable with the loss signature (a reader's own function)."""
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn in FRAMEWORK_LOSSES:
        return FRAMEWORK_LOSSES[name_or_fn]
    if name_or_fn not in LOSSES:
        raise ValueError(f"unknown loss {name_or_fn!r}; available: {available_losses()}; "
                         f"also the frameworks' {framework_losses()}")
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


dr_grpo_loss.std_scaling = False    # its advantage default (a trainer reads it): no division by the std


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


# ----------------------------------------------------------------------------------------------
# the other losses verl 0.9.1 and TRL 1.16.0 can select (FRAMEWORK_LOSSES): each a diff of a parent
# ----------------------------------------------------------------------------------------------
F = FRAMEWORK_LOSSES


@register_loss("gpg", F)
def gpg_loss(logp, old_logp, adv, mask, *, agg="token-mean", max_len=None, is_weight=None):
    """GPG (Chu et al. 2025): plain REINFORCE, -A log pi, with no ratio and no clip.

    Differs from CISPO in the weight: 1 instead of sg(clip(r)); old_logp is unused (only checked).
    Read from verl 0.9.1 core_algos.compute_policy_loss_gpg; GPG's other half is its advantage
    (``advantages.gpg_advantages``).
    """
    _, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    loss_tok = -adv_tok * zero_padding(logp, mask)                            # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    return loss, {}


def dppo_keep(logp, old_logp, adv_tok, mask, divergence: str, delta_low: float, delta_high: float):
    """DPPO's trust-region mask [B, T] (bool, no gradient): the tokens whose update stays inside.

    tv: keep A > 0 where pi - pi_old <= delta_high, A <= 0 where pi - pi_old >= -delta_low;
    kl: the Bernoulli KL(pi_old || pi) of the sampled token's probability must stay <= delta
    (delta_high for A > 0, delta_low otherwise), and a move against the advantage is always kept.
    """
    p = torch.exp(zero_padding(logp, mask)).detach()                          # [B, T]
    p_old = torch.exp(zero_padding(old_logp, mask)).detach()
    if divergence == "tv":
        keep_pos, keep_neg = p - p_old <= delta_high, p - p_old >= -delta_low
    else:
        # verl's form, with its 1e-8 guards inside the second logarithm
        bkl = p_old * (p_old.log() - p.log()) + (1 - p_old) * torch.log((1 - p_old + 1e-8) / (1 - p + 1e-8))
        keep_pos, keep_neg = (bkl <= delta_high) | (p <= p_old), (bkl <= delta_low) | (p >= p_old)
    return torch.where(adv_tok > 0, keep_pos, keep_neg) & mask


def _dppo(logp, old_logp, adv, mask, divergence, delta_low, delta_high, trunc, agg, max_len, is_weight):
    check_number(delta_low, "delta_low", gt=0)
    check_number(delta_high, "delta_high", gt=0)
    check_number(trunc, "trunc", gt=0)
    ratio, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    keep = dppo_keep(logp, old_logp, adv_tok, mask, divergence, delta_low, delta_high)   # [B, T]
    w = ratio.clamp(max=trunc).detach() * keep                                # differs from CISPO here
    loss_tok = -w * adv_tok * zero_padding(logp, mask)                        # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    stats = clip_stats(ratio, adv_tok, mask, None, None)
    stats["clip/low_frac"] = stat(masked_mean((~keep & (adv_tok <= 0)).double(), mask))
    stats["clip/high_frac"] = stat(masked_mean((~keep & (adv_tok > 0)).double(), mask))
    return loss, stats


@register_loss("dppo_tv", F)
def dppo_tv_loss(logp, old_logp, adv, mask, *, delta_low=0.2, delta_high=0.2, trunc=3.0,
                 agg="token-mean", max_len=None, is_weight=None):
    """DPPO-Binary-TV (arXiv 2602.04879): -sg(min(r, trunc)) A log pi on the tokens inside the region.

    Differs from CISPO in the weight: a hard trust-region mask on the probability change
    pi - pi_old (``dppo_keep``) replaces the ratio clip, so a token is dropped (no gradient) once
    its *probability* has moved delta, whatever its ratio; a rare token can double its ratio and
    stay. Read from verl 0.9.1 core_algos.compute_policy_loss_dppo_tv: delta_low/high are verl's
    clip_ratio_low/high (default 0.2, shared with PPO), trunc is its clip_ratio_c (config default
    3.0, shared with dual-clip PPO; the source's own fallback is 20, and its comment recommends a
    large value).
    """
    return _dppo(logp, old_logp, adv, mask, "tv", delta_low, delta_high, trunc, agg, max_len, is_weight)


@register_loss("dppo_kl", F)
def dppo_kl_loss(logp, old_logp, adv, mask, *, delta_low=0.2, delta_high=0.2, trunc=3.0,
                 agg="token-mean", max_len=None, is_weight=None):
    """DPPO-Binary-KL (arXiv 2602.04879): DPPO-TV with the Bernoulli KL as the divergence.

    Differs from ``dppo_tv_loss`` only in ``dppo_keep``'s divergence:
    KL = pi_old log(pi_old / pi) + (1 - pi_old) log((1 - pi_old) / (1 - pi)) <= delta.
    Read from verl 0.9.1 core_algos.compute_policy_loss_dppo_kl (same knobs as dppo_tv).
    """
    return _dppo(logp, old_logp, adv, mask, "kl", delta_low, delta_high, trunc, agg, max_len, is_weight)


def _seq_loss(loss_seq: Tensor, mask: Tensor, is_weight, agg, max_len) -> Tensor:
    """A per-sequence loss [B] spread over its tokens [B, T], times the IS weight, aggregated."""
    loss_tok = loss_seq[:, None].expand(mask.shape)                          # [B, T]
    weight = None if is_weight is None else zero_padding(is_weight.detach(), mask)
    return aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)


@register_loss("gmpo", F)
def gmpo_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.2,
              agg="seq-mean-token-mean", max_len=None, is_weight=None):
    """GMPO (Zhao et al. 2025, arXiv 2507.20673): -A exp(mean_t clip(log r_t)), verl's ``geo_mean``.

    Differs from GSPO in where it clips: each token's log r is clipped to [-eps_low, eps_high]
    on the side the advantage favours (PPO's pessimistic min, in log space) *before* the
    geometric mean, and the sequence ratio itself is not clipped; a clipped token drops out of the
    gradient, the rest of its response keeps it. adv is one value per sequence [B].
    Read from verl 0.9.1 core_algos.compute_policy_loss_geo_mean, which reads clip_ratio_low/high
    as these log-space bounds (default 0.2: r in [e^-0.2, e^0.2]), ignores loss_agg_mode (a mean
    over all B rows, empty ones included; here the mean over non-empty rows), weights by the
    geometric mean of the token IS weights (here the weight multiplies each token's loss, as in
    GSPO: the same for one weight per response) and does not clamp log r at +-20 (here it does).
    """
    _check_clip(eps_low, eps_high)
    check_token_inputs(mask, logp=logp, old_logp=old_logp, is_weight=is_weight)
    adv = check_seq_adv(adv, mask, "GMPO").detach()                                      # [B]
    log_r = log_ratio(logp, old_logp.detach(), mask)                                     # [B, T]
    sgn = torch.sign(adv)[:, None]                                                       # [B, 1]
    log_r_clip = sgn * torch.minimum(sgn * log_r, sgn * log_r.clamp(-eps_low, eps_high))  # [B, T]
    s = torch.exp(masked_mean(log_r_clip, mask, dim=-1))                                 # [B]
    loss = _seq_loss(-adv * s, mask, is_weight, agg, max_len)
    lo, hi = math.exp(-eps_low), math.exp(eps_high)
    return loss, clip_stats(torch.exp(log_r), adv[:, None].expand(mask.shape), mask, 1 - lo, hi - 1)


@register_loss("luspo", F)
def luspo_loss(logp, old_logp, adv, mask, *, eps_low=3e-4, eps_high=4e-4,
               agg="seq-mean-token-sum", max_len=None, is_weight=None):
    """LUSPO (arXiv 2602.05261): GSPO with each response's loss scaled by its length |y_i|.

    Differs from GSPO only in the default aggregation: seq-mean-token-sum, i.e.
    (1/B) sum_i |y_i| * -min(s_i A_i, clip(s_i) A_i). Read from TRL 1.16.0
    GRPOTrainer._compute_loss, loss_type="luspo" with importance_sampling_level="sequence"
    (``(per_token_loss * mask).sum(-1).mean()``); TRL's clip range is its usual epsilon /
    epsilon_high (default 0.2), the defaults here are GSPO's.
    """
    return gspo_loss(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high, agg=agg,
                     max_len=max_len, is_weight=is_weight)


VESPO_LOG_W_MIN = math.log(1e-8)     # TRL's lower clamp of the sequence log-weight


def vespo_gate(log_w: Tensor, adv: Tensor, k_pos, lambda_pos, k_neg, lambda_neg) -> Tensor:
    """VESPO's gamma weight phi(w) = e^lambda w^k e^(-lambda w) [B]: phi(1) = 1, peak at w = k / lambda.

    log_w [B] is the clamped log of the sequence weight; (k, lambda) = (k_pos, lambda_pos) where
    A >= 0, (k_neg, lambda_neg) elsewhere.
    """
    pos = adv >= 0
    k = torch.where(pos, torch.full_like(log_w, k_pos), torch.full_like(log_w, k_neg))
    lam = torch.where(pos, torch.full_like(log_w, lambda_pos), torch.full_like(log_w, lambda_neg))
    return torch.exp(lam + k * log_w - lam * torch.exp(log_w))


@register_loss("vespo", F)
def vespo_loss(logp, old_logp, adv, mask, *, k_pos=2.0, lambda_pos=3.0, k_neg=3.0, lambda_neg=2.0,
               agg="token-mean", max_len=None, is_weight=None):
    """VESPO (arXiv 2602.10693): -sg(phi(w_i)) A log pi with w_i = prod_t r_it, the sequence weight.

    Differs from CISPO in the weight: a smooth gamma-shaped function of the *product* of the
    response's token ratios (``vespo_gate``), the same for every token of the response, instead of
    each token's clipped ratio. log w is clamped to [log 1e-8, 20]. adv is one value per sequence.
    Read from TRL 1.16.0 GRPOTrainer.get_gamma_weights and _compute_loss (loss_type="vespo",
    aggregated like "dapo": token-mean). TRL folds its sampler IS ratio into w rather than
    multiplying the loss by it; here is_weight multiplies the loss like every other loss's.
    """
    for name, v in (("k_pos", k_pos), ("lambda_pos", lambda_pos), ("k_neg", k_neg), ("lambda_neg", lambda_neg)):
        check_number(v, name, gt=0)
    ratio, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    adv = check_seq_adv(adv, mask, "VESPO").detach()                                     # [B]
    log_w = masked_sum(log_ratio(logp, old_logp.detach(), mask), mask, dim=-1)           # [B]
    log_w = log_w.clamp(VESPO_LOG_W_MIN, LOG_RATIO_CLAMP).detach()
    phi = vespo_gate(log_w, adv, k_pos, lambda_pos, k_neg, lambda_neg)                   # [B]
    loss_tok = -phi[:, None] * adv_tok * zero_padding(logp, mask)                        # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    return loss, clip_stats(ratio, adv_tok, mask, None, None)


@register_loss("dro", F)
def dro_loss(logp, old_logp, adv, mask, *, beta=1.0, agg="token-mean", max_len=None, is_weight=None):
    """DRO as verl 0.9.1 writes it: -(A log pi - beta/2 (log r)^2), REINFORCE with a quadratic pull.

    Differs from GPG by the penalty: the gradient coefficient is A - beta log r, so a token whose
    log-ratio reaches A / beta stops moving (a soft trust region, no clip). Read from
    core_algos.compute_policy_loss_dro; verl states no default for its policy_loss.dro_beta (it
    must be set > 0); the 1.0 here is the course's choice. The DRO paper (Richemond et al. 2024,
    arXiv 2405.19107, "Offline Regularised RL") fits a mean-squared objective,
    (r - V(x) - tau log(pi / pi_ref))^2 / 2, with a learned value V(x): its gradient is
    tau (r - V - tau log(pi / pi_ref)) grad log pi, i.e. this coefficient scaled by tau with
    beta = tau, A = r - V and pi_old in the place of pi_ref. Checked against the paper's abstract
    and secondary summaries of its Eq. 4 (and Tinker's "dro" loss, which writes verl's form and
    cites Richemond et al. and Kimi k1.5), not against the paper's text itself.
    """
    check_number(beta, "beta", gt=0)
    _, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    log_r = log_ratio(logp, old_logp.detach(), mask)                                     # [B, T]
    loss_tok = -(adv_tok * zero_padding(logp, mask) - 0.5 * beta * log_r ** 2)           # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    return loss, {}


@torch.no_grad()
def _centred_cov(logp, adv_tok, mask) -> Tensor:
    """(A - mean A)(log pi - mean log pi) per token [B, T], means over the valid tokens."""
    lp = zero_padding(logp, mask)
    return (adv_tok - masked_mean(adv_tok, mask)) * (lp - masked_mean(lp, mask))


@register_loss("clip_cov", F)
def clip_cov_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.2, cov_ratio=2e-4,
                  cov_lb=1.0, cov_ub=5.0, generator=None, agg="token-mean", max_len=None,
                  is_weight=None):
    """Clip-Cov (Cui et al. 2025, arXiv 2505.22617): PPO with a few high-covariance tokens detached.

    Differs from PPO in one factor: among the valid tokens PPO's clip leaves alone, those whose
    centred covariance (A - mean A)(log pi - mean log pi) lies in (cov_lb, cov_ub) are candidates,
    and max(1, int(cov_ratio N)) of them, drawn at random (``generator``; None: torch's global
    generator, as verl), lose their loss and gradient. No dual clip. Read from verl 0.9.1
    core_algos.compute_policy_loss_clip_cov (policy_loss.clip_cov_ratio/lb/ub, defaults 2e-4, 1, 5).
    """
    _check_clip(eps_low, eps_high)
    check_number(cov_ratio, "cov_ratio", gt=0)
    ratio, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    loss_tok = clipped_surrogate(ratio, adv_tok, eps_low, eps_high)                      # [B, T]
    with torch.no_grad():
        clip_binds = -adv_tok * clip_ratio(ratio, eps_low, eps_high) > -adv_tok * ratio
        cov = _centred_cov(logp, adv_tok, mask)
        idx = torch.nonzero(mask & ~clip_binds & (cov > cov_lb) & (cov < cov_ub))        # [K, 2]
        n_pick = max(int(cov_ratio * int(mask.sum())), 1)
        if len(idx):
            idx = idx[torch.randperm(len(idx), generator=generator)[:n_pick]]
        keep = torch.ones_like(loss_tok)
        keep[idx[:, 0], idx[:, 1]] = 0
    loss = aggregate(_apply_weight(loss_tok * keep, weight), mask, agg, max_len)
    return loss, clip_stats(ratio, adv_tok, mask, eps_low, eps_high)


@register_loss("kl_cov", F)
def kl_cov_loss(logp, old_logp, adv, mask, *, kl_ratio=2e-4, kl_coef=0.1, agg="token-mean",
                max_len=None, is_weight=None):
    """KL-Cov (Cui et al. 2025, arXiv 2505.22617): the unclipped -r A, plus kl_coef |log r| on the
    max(1, int(kl_ratio N)) valid tokens of highest centred covariance (A - mean A)(log pi - mean).

    Differs from PPO in its trust region: no clip anywhere, a KL-like pull on a few tokens instead.
    Read from verl 0.9.1 core_algos.compute_policy_loss_kl_cov (policy_loss.kl_cov_ratio, default
    2e-4; policy_loss.ppo_kl_coef, config default 0.1, the source's own fallback 1.0).
    """
    check_number(kl_ratio, "kl_ratio", gt=0)
    check_number(kl_coef, "kl_coef", ge=0)
    ratio, adv_tok, weight = _prepare(logp, old_logp, adv, mask, is_weight)
    log_r = log_ratio(logp, old_logp.detach(), mask)                                     # [B, T]
    with torch.no_grad():
        cov = _centred_cov(logp, adv_tok, mask)[mask]                                    # [N]
        pull = torch.zeros(mask.shape, dtype=torch.bool)
        if len(cov):
            top = torch.topk(cov, max(1, int(len(cov) * kl_ratio))).indices
            pull.view(-1)[torch.nonzero(mask.reshape(-1))[top, 0]] = True
    loss_tok = -adv_tok * ratio + kl_coef * log_r.abs() * pull                            # [B, T]
    loss = aggregate(_apply_weight(loss_tok, weight), mask, agg, max_len)
    return loss, clip_stats(ratio, adv_tok, mask, None, None)


del F


def grad_coefficient(loss: str | LossFn, ratio, adv: float, *, p_old: float = 1.0, **kwargs) -> Tensor:
    """Per-token gradient coefficient c(r, A) of a loss, by autograd. ratio [N] -> c [N].

    Builds N one-token sequences with log r = log(ratio) and advantage ``adv``, aggregates with
    token-mean (alpha = 1/N), and returns c = -N * d loss / d logp, the factor multiplying
    grad log pi(token) in the gradient that is *ascended* (fact sheet §7). ``p_old`` is the sampled
    token's old probability (pi = r p_old); only losses that read probabilities (DPPO) depend on it.
    """
    fn = resolve_loss(loss)
    check_number(p_old, "p_old", gt=0, le=1)
    ratio = torch.as_tensor(ratio, dtype=torch.float64).reshape(-1)
    if (ratio <= 0).any():
        raise ValueError("ratio must be > 0 everywhere")
    N = ratio.numel()
    old_logp = torch.full((N, 1), math.log(p_old), dtype=torch.float64)      # [N, 1]
    logp = (ratio.log()[:, None] + old_logp).requires_grad_(True)            # [N, 1]
    mask = torch.ones(N, 1, dtype=torch.bool)
    adv_seq = torch.full((N,), float(adv), dtype=torch.float64)
    value, _ = fn(logp, old_logp, adv_seq, mask, **{"agg": "token-mean", **kwargs})
    (grad,) = torch.autograd.grad(value, logp)
    return (-N * grad[:, 0]).to(torch.float64)
