"""``train(config) -> History``: GRPO-family RL on a task (addition by default), calling course_lib's pieces.

``train`` reads top to bottom; each RL step is
  1. ``collect``: sample P prompts x G responses with the sampler (possibly mismatched to the
     learner), reward = the verifier's verdict (+ rewards.overlong_penalty, + a length bonus); with
     dynamic sampling, keep only groups with signal and sample again until P groups remain -> a ``Batch``
  2. ``learn``: log pi_old (the learner's recompute without gradient or, with one optimiser step per
     batch, the loss forward's own log-probs detached: the same numbers) and log pi_ref (only when a
     KL term, an evaluation step or ``monitor_kl_ref`` needs it), the advantages from
     advantages.py's estimator the config names (``ADV_ESTIMATORS``), corrections.correction_weights for the TIS/MIS
     weight against the sampler's log-probs (``targets``); then for each epoch and minibatch of whole
     groups one optimiser step on ``policy_loss``:
     loss_fn(logp, old_logp, adv, mask, **knobs, is_weight=w) + beta * aggregate(kl_estimate(...))
With ``micro_batches`` > 1 each optimiser step's backward runs in pieces (gradient accumulation) and
with ``world_size`` > 1 on gloo ranks under DDP (``train_distributed``), each piece scaled by
``split.piece_scale`` so the gradient is the whole minibatch's (``split_backward``; chapter 10).
Forward passes run in ``cfg.precision`` (``policy.compute_precision``: float32, TF32 on CUDA, or
bfloat16 autocast), the sampler's in ``cfg.sampler_precision`` when set; a step's metrics stay on
the device until one copy reads them all back (``read_back``).
The loss functions come from ``losses.resolve_loss`` (a registered name or a callable), and a loss's
own defaults (its aggregation, whether its advantage divides by the std) are read from the loss:
this file contains no loss, advantage, aggregation, KL or correction formula of its own.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import inspect
import math
import time
from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import Tensor
from tqdm import tqdm          # the text bar: in a notebook it writes to a display line (below)

from .. import advantages, corrections, kl, losses, ratios, rewards
from ..aggregation import aggregate
from ..masking import masked_mean
from ..metrics import check_keys
from .config import ToyConfig
from .history import History, config_record, load_histories, save_histories  # noqa: F401 (re-exported)
from .policy import TinyGPT, compute_precision, full_precision, response_logits, sample, token_logp
from .task import EOS, PAD, correctness, make_task

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


# ----------------------------------------------------------------------------------------------
# progress display
# ----------------------------------------------------------------------------------------------
class _DisplayLine:
    """A file for tqdm that shows its latest line in one notebook output, updated in place.

    The update goes through a display id, so a notebook executed by nbconvert stores the bar's
    final state (not the 0% a widget's text fallback keeps), and no widget is needed to see it.
    """

    def __init__(self):
        self.handle = None

    def write(self, s: str) -> None:
        line = s.replace("\n", "\r").split("\r")
        line = next((x for x in reversed(line) if x.strip()), None)
        if line is None:
            return
        from IPython.display import display
        if self.handle is None:
            self.handle = display({"text/plain": line}, raw=True, display_id=True)
        else:
            self.handle.update({"text/plain": line}, raw=True)

    def flush(self) -> None:
        pass


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A tqdm bar: in a notebook one text line updated in place (its final state stays in the
    stored output), in a terminal tqdm's usual bar on stderr, nothing when not ``enabled``."""
    if not enabled:
        return tqdm(total=total, disable=True)
    if _in_notebook():
        return tqdm(total=total, desc=desc, file=_DisplayLine(), ncols=96, mininterval=1.0)
    return tqdm(total=total, desc=desc, mininterval=1.0)


# ----------------------------------------------------------------------------------------------
# model, warm start, evaluation, schedule
# ----------------------------------------------------------------------------------------------
def build_model(cfg: ToyConfig, dtype: torch.dtype = torch.float32) -> TinyGPT:
    """The policy for the config's task: its vocabulary, its prompt plus the generation budget."""
    task = make_task(cfg)
    return TinyGPT(cfg.n_layer, cfg.d_model, cfg.n_head, block_size=task.prompt_len + cfg.max_new_tokens,
                   dtype=dtype, vocab_size=task.vocab_size)


_WARM_CACHE: dict = {}


def warm_start(cfg: ToyConfig, device: torch.device | None = None, *, progress: bool = False,
               dtype: torch.dtype = torch.float32) -> tuple[dict, float]:
    """Supervised warm start on deliberately imperfect answers -> (state_dict on CPU, seconds).

    Cached per process by the fields it depends on, so runs that differ only in RL knobs start
    from the same policy and pay for it once.
    """
    device = device or cfg.resolved_device()
    key = (cfg.task, cfg.n_layer, cfg.d_model, cfg.n_head, cfg.max_new_tokens, cfg.warm_steps, cfg.warm_batch,
           cfg.warm_lr, cfg.warm_noise, cfg.warm_target, cfg.warm_seed, cfg.n_heldout, device.type, dtype,
           cfg.precision)
    if key in _WARM_CACHE:
        return _WARM_CACHE[key]
    t0 = time.perf_counter()
    torch.manual_seed(cfg.warm_seed)
    model = build_model(cfg, dtype).to(device)
    g = torch.Generator().manual_seed(cfg.warm_seed)
    task = make_task(cfg)
    train_prompts = task.prompts("train")
    probe = train_prompts[:512].to(device)          # training prompts: the held-out set stays unseen
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warm_lr, weight_decay=0.0)
    target = "" if cfg.warm_target is None else f" to greedy acc {cfg.warm_target}"
    bar = progress_bar(cfg.warm_steps, f"warm start{target}", progress and cfg.warm_steps > 0)
    for step in range(cfg.warm_steps):
        if cfg.warm_target is not None and step % 10 == 0:
            acc = heldout_accuracy(model, probe, cfg.max_new_tokens, cfg.precision, task.verifiers["exact"])
            bar.set_postfix_str(f"greedy acc {acc:.3f}", refresh=False)
            if acc >= cfg.warm_target:
                bar.total = step                    # reached: the bar ends full, not stalled
                break
        for group in opt.param_groups:
            group["lr"] = cfg.warm_lr * min(1.0, (step + 1) / 10)
        idx = torch.randint(len(train_prompts), (cfg.warm_batch,), generator=g)
        prompts = train_prompts[idx]
        answers = task.warm_answers(prompts, cfg.warm_noise, g, cfg.max_new_tokens)
        seq = to_device(torch.cat([prompts, answers], dim=1), device)          # [N, Lp + T]
        with compute_precision(cfg.precision, device):
            logits = full_precision(model(seq[:, :-1])[:, task.prompt_len - 1:])  # [N, T, V]
        target_tok = seq[:, task.prompt_len:]                                     # [N, T]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 target_tok.reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.update(1)
    bar.close()
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    _WARM_CACHE[key] = (state, time.perf_counter() - t0)
    return _WARM_CACHE[key]


@torch.no_grad()
def heldout_accuracy(model: TinyGPT, prompts: Tensor, max_new_tokens: int, precision: str = "fp32",
                     verifier: Callable[[Tensor, Tensor], Tensor] | None = None) -> float:
    """Greedy-decoding accuracy on the given prompts, by ``verifier`` (default: the addition task's
    exact check)."""
    with compute_precision(precision, prompts.device):
        roll = sample(model, prompts, max_new_tokens, greedy=True, stop_check_every=stop_check_every(prompts.device))
    return float((verifier or correctness)(prompts, roll.responses).mean())


def lr_at(cfg: ToyConfig, opt_step: int, total_opt_steps: int) -> float:
    """Linear warm-up over warmup_steps optimiser steps, then constant or cosine to lr_min."""
    warm = min(1.0, (opt_step + 1) / max(cfg.warmup_steps, 1))
    if cfg.lr_schedule == "constant":
        return cfg.lr * warm
    frac = min(opt_step / max(total_opt_steps - 1, 1), 1.0)
    return warm * (cfg.lr_min + (cfg.lr - cfg.lr_min) * 0.5 * (1 + math.cos(math.pi * frac)))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_device(t: Tensor, device: torch.device) -> Tensor:
    """A CPU tensor on ``device``; to a GPU from pinned memory without blocking the host."""
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def stop_check_every(device: torch.device) -> int:
    """How often the sampler asks whether every row has ended: each answer is a host sync on a GPU
    (the queue drains), free on a CPU, where checking every token keeps the fewest decoding steps."""
    return 1 if device.type != "cuda" else 8


def read_back(metrics: dict) -> dict:
    """A step's metrics with every tensor among them read back to the host in one copy (float64,
    which holds a float32 value exactly: the floats are those float(tensor) gives one by one)."""
    keys = [k for k, v in metrics.items() if isinstance(v, Tensor)]
    if not keys:
        return dict(metrics)
    dev = metrics[keys[0]].device
    values = torch.stack([metrics[k].detach().reshape(()).to(dev, torch.float64) for k in keys]).tolist()
    return {**metrics, **dict(zip(keys, values))}


def _pad_cat(tensors: list, value) -> Tensor:
    """Concatenate [B_i, T_i] tensors along B, right-padding each to the largest T with value."""
    T = max(t.shape[1] for t in tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, T - t.shape[1]), value=value) for t in tensors])


# ----------------------------------------------------------------------------------------------
# 1. sampling, reward shaping, dynamic-sampling filter
# ----------------------------------------------------------------------------------------------
@dataclass
class Batch:
    """What one update learns from: whole groups of G responses, contiguous. B = n_groups * G."""
    prompts: Tensor         # [B, Lp]
    responses: Tensor       # [B, T] PAD after EOS
    mask: Tensor            # [B, T] bool
    rollout_logp: Tensor    # [B, T] log-probs under the sampler (0 on padding)
    rewards: Tensor         # [B] shaped rewards (correctness + overlong penalty)


@dataclass
class Collected:
    """One step's sampling: the batch to learn from and every response drawn for it."""
    batch: Batch | None     # None when dynamic sampling kept no group
    rewards: Tensor         # [N] shaped rewards of every response drawn (N = rounds * P * G)
    correct: Tensor         # [N] 0/1 correctness
    lengths: Tensor         # [N] response lengths (tokens, EOS included)
    truncated: Tensor       # [N] bool: the response reached the budget without an EOS
    seconds: float          # wall time inside the sampler
    tokens: int             # sampled token slots
    flops: float            # model FLOPs of sampling


def shaped_rewards(cfg: ToyConfig, passed: Tensor, lengths: Tensor, formatted: Tensor | None = None) -> Tensor:
    """The reward the advantage sees: the verifier's 0/1, plus ``format_weight`` times the format
    verdict ``formatted`` (a second reward term), plus DAPO's overlong penalty when enabled, plus
    ``length_bonus`` per response token (a misconfiguration chapter 08 studies)."""
    out = passed.clone()
    if cfg.format_weight:
        if formatted is None:
            raise ValueError("format_weight is set: shaped_rewards needs the format verdicts (formatted)")
        out = out + cfg.format_weight * formatted.to(out.dtype)
    if cfg.overlong_penalty:
        out = out + rewards.overlong_penalty(lengths, cfg.max_new_tokens, cfg.overlong_cache)   # DAPO Eq. 13
    if cfg.length_bonus:
        out = out + cfg.length_bonus * lengths.to(out.dtype)
    return out


def select_groups(rolls: list, round_rewards: list, n_groups: int, G: int, *, filter_signal: bool):
    """The first ``n_groups`` groups of the rounds' rollouts (with ``filter_signal``: only groups
    whose rewards are not all equal, DAPO §3.2) as one Batch, or None when none is kept."""
    if not filter_signal and len(rolls) == 1:           # everything kept: no gather (a sync on a GPU)
        ro, r = rolls[0], round_rewards[0]
        cut = n_groups * G
        return Batch(ro.prompts[:cut], ro.responses[:cut], ro.mask[:cut], ro.rollout_logp[:cut], r[:cut])
    keep = [advantages.signal_groups(r, G).repeat_interleave(G) if filter_signal
            else torch.ones_like(r, dtype=torch.bool) for r in round_rewards]       # [B] per round
    n_keep = min(sum(int(k.sum()) for k in keep) // G, n_groups)
    if n_keep == 0:
        return None
    cut = n_keep * G
    return Batch(prompts=torch.cat([ro.prompts[k] for ro, k in zip(rolls, keep)])[:cut],
                 responses=_pad_cat([ro.responses[k] for ro, k in zip(rolls, keep)], PAD)[:cut],
                 mask=_pad_cat([ro.mask[k] for ro, k in zip(rolls, keep)], False)[:cut],
                 rollout_logp=_pad_cat([ro.rollout_logp[k] for ro, k in zip(rolls, keep)], 0.0)[:cut],
                 rewards=torch.cat([r[k] for r, k in zip(round_rewards, keep)])[:cut])


def collect(cfg: ToyConfig, sampler: TinyGPT, train_prompts: Tensor, gen: torch.Generator,
            cpu_gen: torch.Generator, flops_per_token: Callable[[float], float]) -> Collected:
    """Sample P prompts x G responses (more rounds with dynamic sampling) and shape the rewards."""
    task = make_task(cfg)
    P, G, T_max = cfg.prompts_per_step, cfg.group_size, cfg.max_new_tokens
    noise = cfg.logits_noise if cfg.mismatch == "noise" else 0.0
    device = train_prompts.device
    rolls, shaped, correct, lengths, truncated = [], [], [], [], []
    seconds, tokens, flops = 0.0, 0, 0.0
    for _ in range(cfg.max_sampling_rounds if cfg.dynamic_sampling else 1):
        idx = to_device(torch.randint(len(train_prompts), (P,), generator=cpu_gen), device)
        prompts = train_prompts[idx].repeat_interleave(G, dim=0)           # [B, Lp], groups contiguous
        _sync(device); t0 = time.perf_counter()
        with compute_precision(cfg.sampler_precision or cfg.precision, device):
            roll = sample(sampler, prompts, T_max, temperature=cfg.temperature, generator=gen,
                          logits_noise=noise, stop_check_every=stop_check_every(device))
        _sync(device); seconds += time.perf_counter() - t0
        tokens += roll.responses.numel()
        Lp = prompts.shape[1]
        flops += P * G * (Lp + roll.steps - 1) * flops_per_token((Lp + roll.steps) / 2)
        ok = task.verifiers["exact"](prompts, roll.responses)                 # [B] 0/1, exact
        passed = ok if cfg.verifier == "exact" else task.verifiers[cfg.verifier](prompts, roll.responses)
        n_tok = roll.mask.sum(dim=1)                                          # [B]
        rolls.append(roll); correct.append(ok); lengths.append(n_tok)
        truncated.append(~(roll.responses == EOS).any(dim=1))
        formatted = task.verifiers["format"](prompts, roll.responses) if cfg.format_weight else None
        shaped.append(shaped_rewards(cfg, passed, n_tok, formatted))
        if not cfg.dynamic_sampling:
            break
        if sum(int(advantages.signal_groups(r, G).sum()) for r in shaped) >= P:
            break
    batch = select_groups(rolls, shaped, P, G, filter_signal=cfg.dynamic_sampling)
    return Collected(batch, torch.cat(shaped), torch.cat(correct), torch.cat(lengths),
                     torch.cat(truncated), seconds, tokens, flops)


def _mean_where(x: Tensor, m: Tensor) -> Tensor:
    """Mean of x [N] over m [N] bool without a gather (NaN when m is empty); x holds whole numbers
    here, so the sum is exact and the value is that of x[m].mean()."""
    m = m.to(x.dtype)
    return (x * m).sum() / m.sum()


def sampling_metrics(c: Collected, G: int) -> dict:
    """Metrics of everything drawn this step (before the filter); tensors, read back with the step's."""
    rew, cor, lens = c.rewards, c.correct, c.lengths.float()
    n_groups = len(rew) // G
    return {"reward/mean": rew.mean(), "acc/sampled": cor.mean(), "len/all": lens.mean(),
            "len/correct": _mean_where(lens, cor > 0), "len/wrong": _mean_where(lens, cor == 0),
            "groups/zero_signal_frac": 1.0 - advantages.signal_groups(rew, G).double().sum() / n_groups,
            "reward/group_std": rew.view(-1, G).std(dim=1).mean(),
            "len/truncated_frac": c.truncated.float().mean(),
            "samples/step": len(rew), "time/sample_s": c.seconds,
            "speed/sample_tok_s": c.tokens / max(c.seconds, 1e-9), "flops/sample": c.flops}


# ----------------------------------------------------------------------------------------------
# 2. the update
# ----------------------------------------------------------------------------------------------
@dataclass
class LossSetup:
    fn: Callable            # the loss function, signature of losses.py
    knobs: dict             # the config's knobs it accepts (None knobs left at the loss's default)
    agg: str                # the aggregation mode in use (the KL term uses it too)
    std_scaling: bool       # whether the GRPO advantage divides by the group std


def loss_knobs(loss_fn, cfg: ToyConfig) -> tuple[dict, str]:
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


def loss_setup(cfg: ToyConfig) -> LossSetup:
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


def learner_logp(model: TinyGPT, prompts: Tensor, responses: Tensor, temperature: float,
                 precision: str = "fp32"):
    """The learner's log-probs of the responses at the sampling temperature: [B, T], [B, T, V]
    (the forward in ``precision``, the log-softmax of float32 logits)."""
    with compute_precision(precision, prompts.device):
        logits = response_logits(model, prompts, responses)
    return token_logp(logits, responses, temperature)


def reuses_loss_forward(cfg: ToyConfig) -> bool:
    """Whether pi_old is the loss forward's own log-probs, detached: one optimiser step per batch
    and pi_old from the learner (``old_logp_forward="auto"``), where a separate forward would give
    the same numbers (TRL skips it there too)."""
    return (cfg.old_logp_forward == "auto" and cfg.epochs * cfg.minibatches == 1
            and cfg.old_logp_source == "learner" and cfg.micro_batches == 1 and cfg.world_size == 1)


@torch.no_grad()
def remax_baseline(cfg: ToyConfig, model: TinyGPT, batch: Batch) -> Tensor:
    """ReMax's baseline: the shaped reward of the learner's greedy answer to each group's prompt,
    repeated over the group [B]. The learner decodes it (verl's rollout engine does; the toy's
    sampler is the learner unless a mismatch is faked)."""
    prompts = batch.prompts[::cfg.group_size]                                  # [P, Lp]
    with compute_precision(cfg.precision, prompts.device):
        roll = sample(model, prompts, cfg.max_new_tokens, greedy=True,
                      stop_check_every=stop_check_every(prompts.device))
    verifiers = make_task(cfg).verifiers
    passed = verifiers[cfg.verifier](prompts, roll.responses)
    formatted = verifiers["format"](prompts, roll.responses) if cfg.format_weight else None
    shaped = shaped_rewards(cfg, passed, roll.mask.sum(dim=1), formatted)      # [P]
    return shaped.to(batch.rewards.dtype).repeat_interleave(cfg.group_size)    # [B]


def advantages_of(cfg: ToyConfig, setup: LossSetup, model: TinyGPT, batch: Batch, rewards: Tensor) -> Tensor:
    """The advantages of the config's estimator: [B], or [B, T] for REINFORCE++ and ReMax."""
    if cfg.adv_estimator == "remax":
        baseline = remax_baseline(cfg, model, batch).to(rewards.dtype)          # [B]
        return advantages.remax_advantages(advantages.last_token_rewards(rewards, batch.mask),
                                           baseline, batch.mask)              # [B, T]
    if cfg.std_scope == "batch" and setup.std_scaling:                        # grpo only (config)
        return advantages.batch_std_advantages(rewards, cfg.group_size)
    return ADV_ESTIMATORS[cfg.adv_estimator](rewards, cfg.group_size, setup.std_scaling, batch.mask)


@torch.no_grad()
def targets(cfg: ToyConfig, setup: LossSetup, model: TinyGPT, ref_model: TinyGPT, batch: Batch, *,
            with_ref: bool = True, learner: tuple[Tensor, Tensor] | None = None) -> tuple[Targets, dict]:
    """Advantages, pi_old, pi_ref and correction weights of a batch, and their metrics (tensors).

    ``learner``: the learner's (logp, logp_all) of the batch, detached, when its loss forward has
    computed them already; else a forward without gradient computes them. ``with_ref``: run the
    reference forward (for the KL term and the ``kl/ref`` monitor)."""
    mask = batch.mask
    recomputed, logp_all = learner or learner_logp(model, batch.prompts, batch.responses, cfg.temperature,
                                                   cfg.precision)
    rewards = batch.rewards.to(recomputed.dtype)         # float64 advantages in a float64 run
    adv = advantages_of(cfg, setup, model, batch, rewards)                     # [B] or [B, T]
    adv_tok = adv[:, None].expand_as(mask) if adv.dim() == 1 else adv          # [B, T]
    ref_logp = ref_all = None
    if with_ref:
        ref_logp, ref_all = learner_logp(ref_model, batch.prompts, batch.responses, cfg.temperature,
                                         cfg.precision)
    old_logp = recomputed if cfg.old_logp_source == "learner" else batch.rollout_logp
    is_weight = corrections.correction_weights(cfg.correction, recomputed, batch.rollout_logp, mask,
                                               cfg.correction_cap, cfg.correction_level)
    entropy = -(logp_all.exp() * logp_all).sum(-1)                                # [B, T]
    if cfg.temperature == 1.0:
        entropy_t1 = entropy
    else:                                   # logp_all * T = logits - const: the policy at T = 1
        logp_t1 = torch.log_softmax(logp_all * cfg.temperature, dim=-1)
        entropy_t1 = -(logp_t1.exp() * logp_t1).sum(-1)
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
    if with_ref:
        metrics["kl/ref"] = masked_mean(kl.categorical_kl(logp_all, ref_all), mask)
    return Targets(adv, old_logp, ref_logp, is_weight), metrics


def loss_mask(cfg: ToyConfig, batch: Batch, rows: Tensor) -> Tensor:
    """The tokens the loss reads on the responses ``rows`` [b, T]: their mask, without the responses
    that never ended (no EOS) when ``mask_truncated``."""
    m = batch.mask[rows]
    if cfg.mask_truncated:
        m = m & (batch.responses[rows] == EOS).any(dim=1, keepdim=True)          # [b, T]
    return m


def policy_loss(cfg: ToyConfig, setup: LossSetup, logp: Tensor, batch: Batch, tg: Targets,
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


@dataclass
class DataParallel:
    """This process's place in a data-parallel run (``train_distributed``): rank, world size and the
    learner wrapped in DistributedDataParallel (whose backward averages the ranks' gradients)."""
    rank: int
    world_size: int
    ddp: torch.nn.Module


# monitors reduced over ranks by their maximum; every other one by the mean of the ranks' values
MAX_METRICS = ("ratio/max", "mismatch/abs_logratio_max")


def split_backward(cfg: ToyConfig, setup: LossSetup, model: TinyGPT, batch: Batch, tg: Targets, rows: Tensor,
                   dp: DataParallel | None) -> tuple[Tensor, Tensor, Tensor | None, dict]:
    """One optimiser step's backward on ``rows`` in ``cfg.micro_batches`` pieces (on this rank's rows
    of a data-parallel run): each piece's loss times ``split.piece_scale`` (its count over the
    minibatch's, all-reduced over ranks, times R), so the accumulated gradient, after DDP's average,
    is the whole minibatch's. Returns what ``policy_loss`` returns for the minibatch: the losses as
    this rank's scaled sum (their mean over ranks is the minibatch's loss), the other stats weighted
    by each piece's share of the tokens."""
    from .. import split as S
    R = 1 if dp is None else dp.world_size
    net = model if dp is None else dp.ddp
    counts = S.local_counts(loss_mask(cfg, batch, rows)).to(rows.device)          # tokens, sequences
    if dp is not None:
        import torch.distributed as dist
        dist.all_reduce(counts)                                                    # the minibatch's
    pieces = torch.tensor_split(rows, cfg.micro_batches)
    out: dict = {}
    for j, piece in enumerate(pieces):
        last = j == len(pieces) - 1
        with contextlib.nullcontext() if dp is None or last else dp.ddp.no_sync():   # DDP syncs the last
            logp, logp_all = learner_logp(net, batch.prompts[piece], batch.responses[piece], cfg.temperature,
                                          cfg.precision)                           # [b_j, T]
            total, pg_loss, kl_term, stats = policy_loss(cfg, setup, logp, batch, tg, piece, logp_all)
            m = loss_mask(cfg, batch, piece)
            scale = S.piece_scale(m, setup.agg, counts, R)
            (total * scale).backward()
        share = R * float(m.sum()) / max(float(counts[0]), 1.0)                   # of the tokens, times R
        parts = {"loss/total": (total, scale), "loss/policy": (pg_loss, scale),
                 **({} if kl_term is None else {"kl/penalty": (kl_term, scale)}),
                 **{k: (v, None if k in MAX_METRICS else scale if k.startswith("loss/") else share)
                    for k, v in stats.items()}}
        for k, (v, w) in parts.items():
            v = v.detach() if isinstance(v, Tensor) else torch.tensor(float(v))
            if w is None:
                out[k] = v if k not in out else torch.maximum(out[k], v)
            else:
                out[k] = out.get(k, 0.0) + w * v
    kl = out.pop("kl/penalty", None)
    return out.pop("loss/total"), out.pop("loss/policy"), kl, out


def update(cfg: ToyConfig, setup: LossSetup, model: TinyGPT, opt, batch: Batch, tg: Targets | Callable,
           cpu_gen: torch.Generator, lr_for: Callable[[], float],
           after_step: Callable[[], None] = lambda: None, dp: DataParallel | None = None) -> dict:
    """Epochs x minibatches of whole groups, one optimiser step each -> the update's metrics (tensors
    where computed on the device).

    ``tg``: the batch's Targets, or (one optimiser step, ``reuses_loss_forward``) a function
    (logp, logp_all) of the whole batch, detached, in batch order -> Targets, called once on the
    loss forward's own log-probs. With micro-batches or ``dp`` (this rank's share of a data-parallel
    batch) each step's backward is ``split_backward``'s."""
    G = cfg.group_size
    n_groups = len(batch.rewards) // G
    mb_groups = max(n_groups // cfg.minibatches, 1)
    sums: dict = {}
    maxima, n_updates, tokens, flops = [], 0, 0, 0.0
    ctx = batch.prompts.shape[1] + batch.responses.shape[1]
    with ratios.tensor_stats():
        for _ in range(cfg.epochs):
            order = torch.randperm(n_groups, generator=cpu_gen)
            for start in range(0, n_groups, mb_groups):
                grp = order[start: start + mb_groups]
                rows = to_device((grp[:, None] * G + torch.arange(G)).reshape(-1), batch.mask.device)   # [b]
                lr = lr_for()
                for group in opt.param_groups:
                    group["lr"] = lr
                opt.zero_grad(set_to_none=True)
                if cfg.micro_batches == 1 and dp is None:
                    logp, logp_all = learner_logp(model, batch.prompts[rows], batch.responses[rows],
                                                  cfg.temperature, cfg.precision)                # [b, T]
                    if callable(tg):                 # the whole batch, permuted: back to batch order
                        inv = torch.empty_like(rows)
                        inv[rows] = torch.arange(len(rows), device=rows.device)
                        tg = tg(logp.detach()[inv], logp_all.detach()[inv])
                    total, pg_loss, kl_term, stats = policy_loss(cfg, setup, logp, batch, tg, rows, logp_all)
                    total.backward()
                else:
                    total, pg_loss, kl_term, stats = split_backward(cfg, setup, model, batch, tg, rows, dp)
                gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
                after_step()
                step_stats = {"loss/policy": pg_loss, "loss/total": total, "grad/norm": gnorm,
                              **({} if kl_term is None else {"kl/penalty": kl_term}), **stats}
                for k, v in step_stats.items():          # float64 sums: the sums of float(v)
                    v = v.detach().double() if isinstance(v, Tensor) else v
                    if k == "ratio/max":
                        maxima.append(torch.as_tensor(v, dtype=torch.float64, device=batch.mask.device))
                    else:
                        sums[k] = sums.get(k, 0.0) + v
                n_updates += 1
                tokens += len(rows) * (ctx - 1)
                flops += len(rows) * (ctx - 1) * model.flops_per_token(ctx / 2)
    out = {k: v / n_updates for k, v in sums.items()}
    out.setdefault("kl/penalty", 0.0)
    out.update({"ratio/max": torch.stack(maxima).max().clamp_min(0.0) if maxima else 0.0, "lr": lr, "learn_tokens": tokens, "flops/learn": flops})
    return out


def reduce_over_ranks(metrics: dict, dp: DataParallel | None) -> dict:
    """A step's tensor metrics made the same on every rank: ``MAX_METRICS`` by their maximum, every
    other one by the mean of the ranks' values (a rank's token mean then counts as much as another's,
    whatever their token counts). Identity in one process."""
    if dp is None:
        return metrics
    import torch.distributed as dist
    keys = [k for k, v in metrics.items() if isinstance(v, Tensor)]
    out = dict(metrics)
    for op, group in ((dist.ReduceOp.MAX, [k for k in keys if k in MAX_METRICS]),
                      (dist.ReduceOp.SUM, [k for k in keys if k not in MAX_METRICS])):
        if group:
            t = torch.stack([metrics[k].detach().reshape(()).to(torch.float64) for k in group])
            dist.all_reduce(t, op=op)
            if op == dist.ReduceOp.SUM:
                t = t / dp.world_size
            out.update(zip(group, t))
    return out


def learn(cfg: ToyConfig, setup: LossSetup, model: TinyGPT, ref_model: TinyGPT, opt, batch: Batch,
          cpu_gen: torch.Generator, lr_for: Callable[[], float], after_step: Callable[[], None] = lambda: None,
          *, with_ref: bool = True, dp: DataParallel | None = None) -> dict:
    """One batch learned: ``targets`` (advantages, pi_old, pi_ref, corrections), then ``update``
    -> the step's learning metrics, tensors among them.

    With ``reuses_loss_forward(cfg)`` there is no separate pi_old forward: ``targets`` reads the
    loss forward's own log-probs. ``with_ref``: run the reference forward (needed by a KL term; the
    trainer also runs it on evaluation steps and with ``monitor_kl_ref``)."""
    device = batch.mask.device
    spent = {"targets": 0.0}
    target_metrics: dict = {}

    def make_targets(logp=None, logp_all=None) -> Targets:
        _sync(device); t = time.perf_counter()
        tg, m = targets(cfg, setup, model, ref_model, batch, with_ref=with_ref,
                        learner=None if logp is None else (logp, logp_all))
        _sync(device); spent["targets"] = time.perf_counter() - t
        target_metrics.update(m)
        return tg
    fused = reuses_loss_forward(cfg) and dp is None
    _sync(device); t0 = time.perf_counter()
    learned = update(cfg, setup, model, opt, batch, make_targets if fused else make_targets(),
                     cpu_gen, lr_for, after_step, dp)
    _sync(device); t_learn = time.perf_counter() - t0 - spent["targets"]
    tokens = learned.pop("learn_tokens")
    ctx = batch.prompts.shape[1] + batch.responses.shape[1]
    passes = (0 if fused else 1) + int(with_ref)              # forwards without gradient
    return {**reduce_over_ranks({**target_metrics, **learned}, dp), "time/learn_s": t_learn,
            "time/targets_s": spent["targets"],
            "speed/learn_tok_s": tokens / max(t_learn, 1e-9),
            "flops/targets": passes * len(batch.rewards) * (ctx - 1)
            * model.flops_per_token(ctx / 2, backward=False)}


def gather_collected(got: Collected, dp: DataParallel | None) -> Collected:
    """One step's sampling on every rank as one Collected (its per-response tensors all-gathered, its
    time and tokens this rank's), so the sampling metrics are the whole batch's. Identity in one process."""
    if dp is None:
        return got
    import torch.distributed as dist

    def cat(t: Tensor) -> Tensor:
        parts = [torch.empty_like(t) for _ in range(dp.world_size)]
        dist.all_gather(parts, t.contiguous())
        return torch.cat(parts)
    return Collected(None, cat(got.rewards), cat(got.correct), cat(got.lengths), cat(got.truncated),
                     got.seconds, got.tokens, got.flops)


# ----------------------------------------------------------------------------------------------
# the loop
# ----------------------------------------------------------------------------------------------
def train(cfg: ToyConfig, *, progress: bool = True, desc: str | None = None,
          stop_after: int | None = None, dtype: torch.dtype = torch.float32) -> History:
    """Warm-start the policy, run ``cfg.steps`` RL steps, return the History of metrics.

    ``progress``: a bar for the warm start and one for RL (in a notebook, each one line whose final
    state stays in the stored output). ``stop_after``: run only the first that many steps of the
    config's schedule (the rows are those of the full run; tests use it). ``dtype``: the policy's
    parameters and every float the update computes; float32 is what the chapters run. float64 with
    a short warm start makes the first steps agree across CPUs to about 1e-11 (``toy.fingerprint``);
    a full warm start amplifies even float64 rounding until runs part.
    """
    device = cfg.resolved_device()
    torch.set_flush_denormal(True)          # collapsed-entropy runs otherwise crawl on denormals
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    R, rank = cfg.world_size, 0
    if R > 1:                               # one rank of train_distributed's process group
        import torch.distributed as dist
        if not dist.is_initialized() or dist.get_world_size() != R:
            raise ValueError(f"world_size={R}: run it with train_distributed(cfg), which starts {R} processes "
                             f"of one process group (this process is not one of them)")
        rank = dist.get_rank()
    task = make_task(cfg)
    train_prompts = task.prompts("train").to(device)
    held_prompts = task.prompts("heldout").to(device)

    state, warm_s = warm_start(cfg, device, progress=progress, dtype=dtype)
    model = build_model(cfg, dtype).to(device)
    model.load_state_dict(state)
    ref_model = copy.deepcopy(model).requires_grad_(False)
    dp = None
    if R > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        dp = DataParallel(rank, R, DDP(model))
    local_cfgs: dict = {}

    def local(c: ToyConfig) -> ToyConfig:   # this rank's share: prompts_per_step / R groups
        if R == 1:
            return c
        if c not in local_cfgs:
            local_cfgs[c] = replace(c, prompts_per_step=c.prompts_per_step // R, world_size=1)
        return local_cfgs[c]
    phases = cfg.phases()                   # the config, and the one in force from each change on
    uses = {c.mismatch for c in phases}
    # a separate sampler for each mismatch the run uses (a stale one needs the learner's past weights,
    # kept from the first step on, so that a sampler falling behind mid-run is behind at once)
    samplers = {m: copy.deepcopy(model).requires_grad_(False) for m in ("bf16", "stale") if m in uses}
    if "bf16" in samplers:
        samplers["bf16"] = samplers["bf16"].to(torch.bfloat16)
    max_stale = max(c.stale_steps for c in phases if c.mismatch == "stale") if "stale" in uses else 0
    snapshots = collections.deque([copy.deepcopy(state)], maxlen=max_stale + 1)

    def after_opt_step():                   # a stale sampler reads weights stale_steps steps old
        if "stale" in uses:
            snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})

    setups = {}                             # the loss of each phase, built once

    def setup_for(c: ToyConfig) -> LossSetup:
        if c not in setups:
            setups[c] = loss_setup(c)
        return setups[c]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.99), weight_decay=0.0,
                            fused=True if device.type == "cuda" else None)   # one kernel per step on a GPU
    total_opt_steps = cfg.steps * cfg.epochs * cfg.minibatches
    opt_steps = 0

    def next_lr() -> float:
        nonlocal opt_steps
        opt_steps += 1
        return lr_at(now_cfg, opt_steps - 1, total_opt_steps)

    torch.manual_seed(cfg.seed)
    # each rank draws its own prompts and samples (rank 0's are a single-process run's)
    gen = torch.Generator(device=device).manual_seed(cfg.seed + 7_919 * rank)       # sampling noise
    cpu_gen = torch.Generator().manual_seed(cfg.seed + 10_000 + 7_919 * rank)       # prompts, minibatch order
    flops_per_token = lambda ctx: model.flops_per_token(ctx, backward=False)   # noqa: E731

    hist = History(config=config_record(cfg), warm_start_s=warm_s)
    hist.rows.append({"step": 0, "acc/heldout": heldout_accuracy(model, held_prompts, cfg.max_new_tokens,
                                                                 cfg.precision, task.verifiers["exact"]),
                      "samples/drawn": 0, "time/elapsed_s": 0.0, "time/elapsed_cpu_s": 0.0})
    drawn, t_start, cpu_start = 0, time.perf_counter(), time.process_time()
    n_steps = cfg.steps if stop_after is None else min(stop_after, cfg.steps)
    bar = progress_bar(n_steps, desc or str(cfg.loss), progress)
    now_cfg = cfg
    for step in range(1, n_steps + 1):
        t_step = time.perf_counter()
        now_cfg = cfg.at(step)                                        # the knobs in force this step
        # ---- 1. sample (plumbing: which weights the sampler has) ----------------------------
        sampler = samplers.get(now_cfg.mismatch, model)
        if now_cfg.mismatch == "stale":                               # stale_steps optimiser steps old
            sampler.load_state_dict(snapshots[max(len(snapshots) - 1 - now_cfg.stale_steps, 0)])
        elif now_cfg.mismatch == "bf16":
            sampler.load_state_dict(model.state_dict())               # cast to bfloat16 on copy
        got = collect(local(now_cfg), sampler, train_prompts, gen, cpu_gen, flops_per_token)
        drawn += len(got.rewards) * R
        row = {"step": step, **sampling_metrics(gather_collected(got, dp), cfg.group_size), "samples/drawn": drawn}

        # ---- 2. learn: pi_old, pi_ref, advantages, corrections; then the optimiser steps -----
        evaluating = step % cfg.eval_every == 0 or step == cfg.steps
        if got.batch is not None:                                     # else nothing to learn from
            learned = learn(local(now_cfg), setup_for(now_cfg), model, ref_model, opt, got.batch, cpu_gen,
                            next_lr, after_opt_step,
                            with_ref=now_cfg.kl_coef > 0 or now_cfg.monitor_kl_ref or evaluating, dp=dp)
            row.update(learned)

        # ---- 3. evaluate and record -------------------------------------------------------
        if evaluating:
            row["acc/heldout"] = heldout_accuracy(model, held_prompts, now_cfg.max_new_tokens, now_cfg.precision,
                                                  task.verifiers["exact"])
            bar.set_postfix_str(f"held-out acc {row['acc/heldout']:.3f}", refresh=False)
        row = read_back(row)
        now = time.perf_counter()
        row.update({"time/step_s": now - t_step, "time/elapsed_s": now - t_start,
                    "time/elapsed_cpu_s": time.process_time() - cpu_start})
        check_keys(k for k in row if k != "step")
        hist.rows.append(row)
        bar.update(1)
    bar.close()
    hist.final_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return hist


def _train_rank(rank: int, world_size: int, cfg: ToyConfig) -> History | None:
    hist = train(cfg, progress=False)
    return hist if rank == 0 else None


def train_distributed(cfg: ToyConfig, *, timeout_s: float = 1800.0) -> History:
    """``train(cfg)`` on ``cfg.world_size`` gloo processes (``distributed.run_ranks``), DDP averaging the
    ranks' gradients: each rank samples prompts_per_step / world_size groups with its own seed, learns on
    them (in ``micro_batches`` pieces), and every rank holds the same weights after each step. Returns
    rank 0's History: the sampling metrics are the whole batch's, the learning ones the mean over ranks
    (``reduce_over_ranks``), the held-out accuracy that of the common weights; times, token counts and
    FLOPs are rank 0's own. Called from a script, it must run under ``if __name__ == "__main__":`` (the
    ranks start from a fork server that re-imports the main module)."""
    from ..distributed import run_ranks
    if cfg.world_size < 2:
        raise ValueError(f"world_size must be >= 2 for train_distributed (1: call train), got {cfg.world_size}")
    return run_ranks(_train_rank, cfg.world_size, cfg, timeout_s=timeout_s)[0]
