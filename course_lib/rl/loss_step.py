"""Step 2 of an RL step, what one minibatch's loss is made of: the config's loss and knobs
(``loss_setup``), the constants fixed once per batch (``targets``: advantages, pi_old, pi_ref, the
TIS/MIS weight, and their monitors) and the loss itself (``policy_loss``: the policy loss, the KL term,
the entropy bonus). Every formula comes from course_lib's kernels; ``trainer.update`` runs the steps.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from .. import advantages, corrections, kl, losses
from ..aggregation import aggregate
from ..masking import masked_mean
from .config import BATCH_WIDE_ESTIMATORS, RunConfig
from .data_parallel import DataParallel, whole_batch
from .device import _sync, stop_check_every
from .policy import Policy, compute_precision, response_logits, token_logp
from .rollout import Batch, shaped_rewards
from .registry import make_task


KNOB_FIELDS = ("eps_low", "eps_high", "dual_clip", "tau_pos", "tau_neg", "agg")


# advantage estimators: rewards [B], G, std scaling, mask [B, T] -> adv [B] or [B, T]; only GRPO and
# pass@k read the std scaling. ReMax also needs a greedy answer per prompt: ``remax_baseline``.
ADV_ESTIMATORS = {
    "grpo": lambda r, G, scale, mask: advantages.group_advantages(r, G, scale=scale),
    "rloo": lambda r, G, scale, mask: advantages.rloo_advantages(r, G),
    "reinforce_pp": lambda r, G, scale, mask: advantages.reinforce_pp_advantages(
        advantages.last_token_rewards(r, mask), mask),                                  # [B, T]
    "reinforce_pp_baseline": lambda r, G, scale, mask: advantages.reinforce_pp_baseline_advantages(
        r, mask, G),                                                                    # [B, T]
    "opo": lambda r, G, scale, mask: advantages.opo_advantages(r, G, mask.sum(dim=-1)),
    "passk": lambda r, G, scale, mask: advantages.passk_advantages(r, G, scale=scale),
    "gpg": lambda r, G, scale, mask: advantages.gpg_advantages(r, G),
}


@dataclass
class LossSetup:
    fn: Callable            # the loss function, signature of losses.py
    knobs: dict             # the config's knobs it accepts (None knobs left at the loss's default)
    agg: str                # the aggregation mode in use (the KL term uses it too)
    std_scaling: bool       # whether the GRPO advantage divides by the group std


def loss_knobs(loss_fn, cfg: RunConfig) -> tuple[dict, str]:
    """The config's loss knobs that ``loss_fn``'s signature accepts, and the aggregation mode in use.

    A knob left at None is not passed (the loss keeps its default). A knob the config sets but the
    loss does not accept is an error, not silently ignored.
    """
    params = inspect.signature(loss_fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    knobs = {}
    for name in KNOB_FIELDS:
        value = getattr(cfg, name)
        if value is None:
            continue
        if name not in params and not takes_any:
            raise ValueError(f"config sets {name}={value!r}, but the loss {cfg.loss!r} has no such "
                             f"keyword (it takes {[p for p in params if p not in ('logp', 'old_logp', 'adv', 'mask')]})")
        knobs[name] = value
    if "max_len" in params or takes_any:
        knobs["max_len"] = cfg.max_new_tokens
    default_agg = params["agg"].default if "agg" in params else "token-mean"
    if default_agg is inspect.Parameter.empty:
        default_agg = "token-mean"
    return knobs, knobs.get("agg", default_agg)


def loss_setup(cfg: RunConfig) -> LossSetup:
    """The loss of the config with its knobs; defaults the config leaves open come from the loss."""
    fn = losses.resolve_loss(cfg.loss)
    knobs, agg = loss_knobs(fn, cfg)
    std_scaling = getattr(fn, "std_scaling", True) if cfg.std_scaling is None else cfg.std_scaling
    return LossSetup(fn, knobs, agg, std_scaling)


@dataclass
class Targets:
    """The constants of the loss, fixed once per batch before the update."""
    adv: Tensor                 # [B], or [B, T] for the token-level estimators (REINFORCE++, ReMax)
    old_logp: Tensor            # [B, T] pi_old: the learner's recompute or the sampler's log-probs
    ref_logp: Tensor | None     # [B, T] the reference (warm-start) policy; None when not computed
    is_weight: Tensor | None    # [B, T] TIS/MIS weight, or None without correction


def learner_logp(model: Policy, prompts: Tensor, responses: Tensor, temperature: float,
                 precision: str = "fp32"):
    """The learner's log-probs of the responses at the sampling temperature: [B, T], [B, T, V]
    (the forward in ``precision``, the log-softmax of float32 logits)."""
    with compute_precision(precision, prompts.device):
        logits = response_logits(model, prompts, responses)
    return token_logp(logits, responses, temperature)


# losses whose difference from GRPO lies in the clip or the gate on the ratio (DAPO also in its aggregation)
CLIP_LOSSES = ("dapo", "gspo", "cispo", "sapo")


class ClipCannotBindWarning(UserWarning):
    """A run sets a clip, or a loss whose point is the clip, where every ratio is exactly 1."""


def clip_cannot_bind(cfg: RunConfig) -> str | None:
    """Why the clip of this config can never bind, or None. With one optimiser step per batch and
    pi_old from the learner, every ratio pi / pi_old is exactly 1 when the gradient is taken: no
    clip range is ever left, and GRPO, DAPO's Clip-Higher, GSPO, CISPO and SAPO give the same
    gradient up to their aggregation. Only a named clip loss or an explicit clip knob counts: GRPO's
    own default clip is not the point of GRPO."""
    set_knobs = [k for k in ("eps_low", "eps_high", "dual_clip", "tau_pos", "tau_neg")
                 if getattr(cfg, k) is not None]
    if not (cfg.loss in CLIP_LOSSES or set_knobs):
        return None
    if cfg.epochs * cfg.minibatches > 1 or cfg.old_logp_source != "learner":
        return None
    what = f"loss={cfg.loss!r}"
    if set_knobs:
        what += " with " + ", ".join(f"{k}={getattr(cfg, k)}" for k in set_knobs)
    return (f"{what}: with one optimiser step per batch (epochs x minibatches = 1) and pi_old "
            f"from the learner, every ratio is exactly 1, so the clip cannot bind and this run's "
            f"gradient is GRPO's up to the aggregation; set minibatches or epochs > 1 for the clip "
            f"to act")


def reuses_loss_forward(cfg: RunConfig) -> bool:
    """Whether pi_old is the loss forward's own log-probs, detached: one optimiser step per batch
    and pi_old from the learner (``old_logp_forward="auto"``), where a separate forward would give
    the same numbers (TRL skips it there too)."""
    return (cfg.old_logp_forward == "auto" and cfg.epochs * cfg.minibatches == 1
            and cfg.old_logp_source == "learner" and cfg.world_size == 1)


@torch.no_grad()
def remax_baseline(cfg: RunConfig, model: Policy, batch: Batch) -> Tensor:
    """ReMax's baseline: the shaped reward of the learner's greedy answer to each group's prompt,
    repeated over the group [B]. The learner decodes it (verl's rollout engine does; the toy's
    sampler is the learner unless a mismatch is faked)."""
    prompts = batch.prompts[::cfg.group_size]                                  # [P, Lp]
    with compute_precision(cfg.precision, prompts.device):
        roll = model.rollout(prompts, cfg.max_new_tokens, greedy=True,
                             stop_check_every=stop_check_every(prompts.device))
    verifiers = make_task(cfg).verifiers
    passed = verifiers[cfg.verifier](prompts, roll.responses)
    formatted = verifiers["format"](prompts, roll.responses) if cfg.format_weight else None
    shaped = shaped_rewards(cfg, passed, roll.mask.sum(dim=1), formatted)      # [P]
    return shaped.to(batch.rewards.dtype).repeat_interleave(cfg.group_size)    # [B]


def advantages_of(cfg: RunConfig, setup: LossSetup, model: Policy, batch: Batch, rewards: Tensor,
                  dp: DataParallel | None = None) -> Tensor:
    """The advantages of the config's estimator: [B], or [B, T] for REINFORCE++ and ReMax.

    On a rank of a data-parallel run (``dp``), an estimator whose statistics span the batch reads every
    rank's rewards and masks (``whole_batch``): this rank's rows get the full batch's advantages."""
    if cfg.adv_estimator == "remax":
        baseline = remax_baseline(cfg, model, batch).to(rewards.dtype)          # [B]
        return advantages.remax_advantages(advantages.last_token_rewards(rewards, batch.mask),
                                           baseline, batch.mask)              # [B, T]
    batch_std = cfg.std_scope == "batch" and setup.std_scaling                 # grpo only (config)
    mask, rows = batch.mask, slice(None)
    if batch_std or cfg.adv_estimator in BATCH_WIDE_ESTIMATORS:
        rewards, mask, rows = whole_batch(rewards, mask, dp)                   # [R * B], [R * B, T_max]
    if batch_std:
        adv = advantages.batch_std_advantages(rewards, cfg.group_size)
    else:
        adv = ADV_ESTIMATORS[cfg.adv_estimator](rewards, cfg.group_size, setup.std_scaling, mask)
    return adv[rows] if adv.dim() == 1 else adv[rows, :batch.mask.shape[1]]   # this rank's rows


# the metrics of ``targets`` that are means over the batch's valid tokens
TOKEN_MEANS = ("entropy/mean", "entropy/t1", "is/weight_mean", "is/zero_frac", "adv/pos_token_frac", "kl/ref")


@torch.no_grad()
def targets(cfg: RunConfig, setup: LossSetup, model: Policy, ref_model: Policy, batch: Batch, *,
            with_ref: bool = True, learner: tuple[Tensor, Tensor] | None = None,
            dp: DataParallel | None = None) -> tuple[Targets, dict]:
    """Advantages, pi_old, pi_ref and correction weights of a batch, and their metrics (tensors).

    ``learner``: the learner's (logp, logp_all) of the batch, detached, when its loss forward has
    computed them already; else a forward without gradient computes them. ``with_ref``: run the
    reference forward (for the KL term and the ``kl/ref`` monitor). ``dp``: this rank's place in a
    data-parallel run (``batch`` is its share), for the estimators that read the whole batch."""
    mask = batch.mask
    step = model.score_rows or len(mask)                          # rows per forward without gradient
    pieces = [token_stats(cfg, model, ref_model, batch, sl, with_ref, learner and tuple(x[sl] for x in learner))
              for sl in (slice(i, i + step) for i in range(0, len(mask), step))]
    recomputed, entropy, entropy_t1, ref_logp, kl_ref = (
        None if p[0] is None else torch.cat(p) for p in zip(*pieces))            # [B, T] each
    rewards = batch.rewards.to(recomputed.dtype)         # float64 advantages in a float64 run
    adv = advantages_of(cfg, setup, model, batch, rewards, dp)                 # [B] or [B, T]
    adv_tok = adv[:, None].expand_as(mask) if adv.dim() == 1 else adv          # [B, T]
    old_logp = recomputed if cfg.old_logp_source == "learner" else batch.rollout_logp
    is_weight = corrections.correction_weights(cfg.correction, recomputed, batch.rollout_logp, mask,
                                               cfg.correction_cap, cfg.correction_level)
    metrics = target_metrics(batch, adv_tok, recomputed, entropy, entropy_t1, is_weight, kl_ref)
    return Targets(adv, old_logp, ref_logp, is_weight), metrics


def target_metrics(batch: Batch, adv_tok: Tensor, recomputed: Tensor, entropy: Tensor, entropy_t1: Tensor,
                   is_weight: Tensor | None, kl_ref: Tensor | None) -> dict:
    """The monitors of a batch's targets (tensors) from its per-token values [B, T]: entropies, the learner /
    sampler gap, the correction weights, the share of tokens pushed up, the KL to the reference (when computed)."""
    mask = batch.mask
    gap = (recomputed - batch.rollout_logp).abs()                                 # [B, T]
    nan = torch.full_like(gap, float("nan"))
    metrics = {             # every row has a valid token (its EOS or its last), so no mean is empty
        "entropy/mean": masked_mean(entropy, mask),
        "entropy/t1": masked_mean(entropy_t1, mask),
        "mismatch/abs_logratio_p99": torch.nanquantile(torch.where(mask, gap, nan).float().reshape(-1), 0.99),
        "mismatch/abs_logratio_max": torch.where(mask, gap, torch.full_like(gap, -float("inf"))).max(),
        "is/weight_mean": 1.0 if is_weight is None else masked_mean(is_weight, mask),
        "is/zero_frac": 0.0 if is_weight is None else masked_mean((is_weight == 0).float(), mask),
        "adv/pos_token_frac": masked_mean((adv_tok > 0).float(), mask),
    }
    if kl_ref is not None:
        metrics["kl/ref"] = masked_mean(kl_ref, mask)
    return metrics


class BatchTargets:
    """The constants of a batch's loss and their monitors, as one object however pi_old is found.

    Each loss forward asks ``for_rows(rows, logp, logp_all)`` with its rows' learner log-probs, detached, and
    gets the batch's ``Targets``. Which forward gives pi_old is fixed when the object is made:
    - ``"ahead"``: a forward without gradient before the update (``targets``), the log-probs asked with
      ignored. Used with several optimiser steps per batch, with pi_old from the sampler, on ranks, and
      with micro-batches when the reference runs too (its forward then runs ahead with pi_old's, not beside
      a micro-batch whose activations wait for their backward: one more forward, less memory at the peak).
    - ``"whole"``: one optimiser step on the whole batch (``reuses_loss_forward``): the first ask, on every
      row in any order, computes the targets from its log-probs (put back in batch order).
    - ``"pieces"``: the same with ``micro_batches`` > 1 and no reference forward: the advantages are fixed
      first, and each ask writes its rows' pi_old, correction weights and monitors; ``targets`` of the whole
      batch would give the same numbers up to float rounding, with one more forward.
    ``seconds``: the time spent in it; ``separate_forward``: whether pi_old cost a forward of its own;
    ``metrics()``: the monitors once every row is asked for."""

    def __init__(self, cfg: RunConfig, setup: LossSetup, model: Policy, ref_model: Policy, batch: Batch, *,
                 with_ref: bool, dp: DataParallel | None = None):
        self.cfg, self.setup, self.model, self.ref_model, self.batch = cfg, setup, model, ref_model, batch
        self.with_ref, self.dp, self.seconds = with_ref, dp, 0.0
        fused = reuses_loss_forward(cfg) and dp is None
        self.mode = ("pieces" if fused and cfg.micro_batches > 1 and not with_ref
                     else "whole" if fused and cfg.micro_batches == 1 else "ahead")
        self._targets, self._metrics = None, None
        if self.mode == "ahead":
            self._compute()
        elif self.mode == "pieces":
            self._start_pieces()

    @property
    def separate_forward(self) -> bool:
        return self.mode == "ahead"

    def for_rows(self, rows: Tensor, logp: Tensor, logp_all: Tensor) -> Targets:
        """The batch's Targets, given the rows ``rows`` [b] of this loss forward and their log-probs [b, T],
        [b, T, V], detached."""
        if self.mode == "whole" and self._targets is None:
            inv = torch.empty_like(rows)                   # the whole batch, permuted: back to batch order
            inv[rows] = torch.arange(len(rows), device=rows.device)
            self._compute((logp[inv], logp_all[inv]))
        elif self.mode == "pieces":
            self._fill(rows, logp, logp_all)
        return self._targets

    def metrics(self) -> dict:
        if self.mode != "pieces":
            return self._metrics
        v, mask = self.values, self.batch.mask
        adv_tok = self.adv[:, None].expand_as(mask) if self.adv.dim() == 1 else self.adv
        return target_metrics(self.batch, adv_tok, v["old_logp"], v["entropy"], v["entropy_t1"],
                              v.get("is_weight"), None)

    def _compute(self, learner: tuple[Tensor, Tensor] | None = None) -> None:
        device = self.batch.mask.device
        _sync(device); t0 = time.perf_counter()
        self._targets, self._metrics = targets(self.cfg, self.setup, self.model, self.ref_model, self.batch,
                                               with_ref=self.with_ref, learner=learner, dp=self.dp)
        self.ref_model.release()                 # pi_ref's log-probs are in the targets: a reloadable one goes
        _sync(device); self.seconds += time.perf_counter() - t0

    def _start_pieces(self) -> None:
        cfg, batch, mask = self.cfg, self.batch, self.batch.mask
        dtype = batch.rollout_logp.dtype
        with torch.no_grad():
            self.adv = advantages_of(cfg, self.setup, self.model, batch, batch.rewards.to(dtype))   # [B] or [B, T]
        zeros = lambda: torch.zeros(mask.shape, dtype=dtype, device=mask.device)     # noqa: E731
        self.values = {name: zeros() for name in ("old_logp", "entropy", "entropy_t1")}
        if cfg.correction != "none":
            self.values["is_weight"] = zeros()
        self._targets = Targets(self.adv, self.values["old_logp"], None, self.values.get("is_weight"))

    @torch.no_grad()
    def _fill(self, rows: Tensor, logp: Tensor, logp_all: Tensor) -> None:
        t0 = time.perf_counter()
        cfg, v = self.cfg, self.values
        recomputed, entropy, entropy_t1, _, _ = token_stats(cfg, self.model, self.ref_model, self.batch, rows,
                                                            False, (logp, logp_all))
        v["old_logp"][rows], v["entropy"][rows], v["entropy_t1"][rows] = recomputed, entropy, entropy_t1
        if "is_weight" in v:
            v["is_weight"][rows] = corrections.correction_weights(
                cfg.correction, recomputed, self.batch.rollout_logp[rows], self.batch.mask[rows],
                cfg.correction_cap, cfg.correction_level)
        self.seconds += time.perf_counter() - t0


def token_stats(cfg: RunConfig, model: Policy, ref_model: Policy, batch: Batch, rows: slice, with_ref: bool,
                learner: tuple[Tensor, Tensor] | None = None) -> tuple:
    """The learner's log-probs of the responses ``rows`` [b, T], their entropies (at the sampling temperature
    and at T = 1) and, ``with_ref``, the reference's log-probs and the exact KL to it per token (else None,
    None). ``learner``: the rows' (logp, logp_all), when the loss forward has them already. ``targets`` calls it
    on the policy's ``score_rows`` rows at a time (all at once for the toy), so the [b, T, V] log-softmax of a
    large vocabulary never exists for the whole batch."""
    prompts, responses = batch.prompts[rows], batch.responses[rows]
    recomputed, logp_all = learner or learner_logp(model, prompts, responses, cfg.temperature, cfg.precision)
    entropy = -(logp_all.exp() * logp_all).sum(-1)                                # [b, T]
    if cfg.temperature == 1.0:
        entropy_t1 = entropy
    else:                                   # logp_all * T = logits - const: the policy at T = 1
        logp_t1 = torch.log_softmax(logp_all * cfg.temperature, dim=-1)
        entropy_t1 = -(logp_t1.exp() * logp_t1).sum(-1)
    if not with_ref:
        return recomputed, entropy, entropy_t1, None, None
    ref_logp, ref_all = learner_logp(ref_model, prompts, responses, cfg.temperature, cfg.precision)
    return recomputed, entropy, entropy_t1, ref_logp, kl.categorical_kl(logp_all, ref_all)


def loss_mask(cfg: RunConfig, batch: Batch, rows: Tensor) -> Tensor:
    """The tokens the loss reads on the responses ``rows`` [b, T]: their mask, without the responses
    that never ended (no EOS) when ``mask_truncated``."""
    m = batch.mask[rows]
    if cfg.mask_truncated:
        m = m & ((batch.responses[rows] == batch.eos_id) & m).any(dim=1, keepdim=True)   # [b, T]
    return m


def policy_loss(cfg: RunConfig, setup: LossSetup, logp: Tensor, batch: Batch, tg: Targets,
                rows: Tensor, logp_all: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor | None, dict]:
    """The loss on the responses ``rows`` [b] whose learner log-probs are ``logp`` [b, T] (and, for
    the entropy bonus, ``logp_all`` [b, T, V]): (total, policy part, KL part or None, loss stats).

    With ``mask_truncated`` a response without an EOS is out of the loss mask (every term)."""
    m = loss_mask(cfg, batch, rows)
    extra = {} if tg.is_weight is None else {"is_weight": tg.is_weight[rows]}
    pg_loss, stats = setup.fn(logp, tg.old_logp[rows], tg.adv[rows], m, **setup.knobs, **extra)
    total, kl_term = pg_loss, None
    if cfg.entropy_coef:
        if logp_all is None:
            raise ValueError("entropy_coef is set: policy_loss needs the learner's logp_all [b, T, V]")
        entropy = -(logp_all.exp() * logp_all).sum(-1)                            # [b, T]
        stats = {**stats, "loss/entropy_bonus": aggregate(entropy, m, setup.agg, cfg.max_new_tokens)}
        total = total - cfg.entropy_coef * stats["loss/entropy_bonus"]
    if cfg.kl_coef:
        kl_term = aggregate(kl.kl_estimate(logp, tg.ref_logp[rows], m, cfg.kl_estimator), m, setup.agg,
                            cfg.max_new_tokens)            # max_len: read by the -norm mode only
        total = total + cfg.kl_coef * kl_term
    return total, pg_loss, kl_term, stats
