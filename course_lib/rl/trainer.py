"""``train(config) -> History``: GRPO-family RL on a task (addition by default), calling course_lib's pieces.

``train`` reads top to bottom; each RL step is
  1. ``collect``: sample P prompts x G responses with the sampler (possibly mismatched to the
     learner: ``samplers``), reward = the verifier's verdict (+ rewards.overlong_penalty, + a length
     bonus); with dynamic sampling, keep only groups with signal and sample again until P groups
     remain -> a ``Batch`` (``rollout``)
  2. ``learn``: log pi_old (the learner's recompute without gradient or, with one optimiser step per
     batch, the loss forward's own log-probs detached: the same numbers) and log pi_ref (only when a
     KL term, an evaluation step or ``monitor_kl_ref`` needs it), the advantages from
     advantages.py's estimator the config names (``ADV_ESTIMATORS``), corrections.correction_weights for the TIS/MIS
     weight against the sampler's log-probs (``BatchTargets``); then for each epoch and minibatch of whole
     groups one optimiser step on ``policy_loss`` (``loss_step``):
     loss_fn(logp, old_logp, adv, mask, **knobs, is_weight=w) + beta * aggregate(kl_estimate(...))
With ``micro_batches`` > 1 each optimiser step's backward runs in pieces (gradient accumulation) and
with ``world_size`` > 1 on gloo ranks under DDP (``train_distributed``, ``data_parallel``), each piece
scaled by ``split.piece_scale`` so the gradient is the whole minibatch's (``split_backward``; chapter 10).
Forward passes run in ``cfg.precision`` (``policy.compute_precision``: float32, TF32 on CUDA, or
bfloat16 autocast), the sampler's in ``cfg.sampler_precision`` when set; a step's metrics stay on
the device until one copy reads them all back (``device.read_back``).
The loss functions come from ``losses.resolve_loss`` (a registered name or a callable), and a loss's
own defaults (its aggregation, whether its advantage divides by the std) are read from the loss:
this file contains no loss, advantage, aggregation, KL or correction formula of its own.

This file holds the loop and the steps that call others (``collect``, ``learn``, ``update``,
``split_backward``); what they call lives by topic beside it: ``model`` (build_model, heldout_accuracy),
``rollout`` (Batch, shaped rewards, the filter, sampling metrics), ``loss_step`` (loss setup, the batch's
targets, policy_loss), ``data_parallel``, ``samplers``, ``schedule`` and ``device``. The package's
``__init__`` re-exports the public names.
"""
from __future__ import annotations

import contextlib
import functools
import time
import warnings
from typing import Callable

import torch
from torch import Tensor

from .. import advantages, ratios
from ..metrics import check_keys
from ..ranks import run_ranks
from .checkpoint import Checkpoint, check_checkpoint, restore_checkpoint, save_checkpoint
from .config import RunConfig
from .data_parallel import (MAX_METRICS, DataParallel, gather_collected, rank_share, reduce_over_ranks, this_rank,
                            token_means_over_ranks, wrap)
from .device import _sync, read_back, return_freed_memory, stop_check_every, to_device
from .history import History, config_record
from .loss_step import (TOKEN_MEANS, BatchTargets, ClipCannotBindWarning, LossSetup, clip_cannot_bind, learner_logp,
                        loss_mask, loss_setup, policy_loss)
from .model import heldout_accuracy
from .policy import Policy, compute_precision
from .progress import progress_bar
from .registry import make_task, policy_class
from .rollout import Batch, Collected, sampling_metrics, select_groups, shaped_rewards
from .samplers import Samplers
from .schedule import LrSchedule

# the policy's optimiser: AdamW with these betas and no weight decay (frameworks.to_trl writes them for TRL)
ADAM_BETAS = (0.9, 0.99)
WEIGHT_DECAY = 0.0


def initial_policy(cfg: RunConfig, device: torch.device, dtype: torch.dtype = torch.float32, *,
                   progress: bool = False) -> tuple[Policy, dict, float]:
    """The policy RL starts from -> (policy on ``device``, its state_dict, seconds to get it): the named
    policy's ``Policy.initial`` (the toy's TinyGPT after its warm start, the real model as pretrained)."""
    return policy_class(cfg.policy).initial(cfg, device, dtype, progress=progress)


# ----------------------------------------------------------------------------------------------
# 1. sampling (the pieces: rollout.py, samplers.py)
# ----------------------------------------------------------------------------------------------
def collect(cfg: RunConfig, sampler: Policy, train_prompts: Tensor, gen: torch.Generator,
            cpu_gen: torch.Generator, flops_per_token: Callable[[float], float]) -> Collected:
    """Sample P prompts x G responses (more rounds with dynamic sampling) and shape the rewards."""
    task = make_task(cfg)
    P, G, T_max = cfg.prompts_per_step, cfg.group_size, cfg.max_new_tokens
    noise = cfg.logits_noise if cfg.mismatch == "noise" else 0.0
    device = train_prompts.device
    rolls, shaped, correct, lengths, truncated, sorted_ = [], [], [], [], [], []
    sort = getattr(task, "reply_categories", None)
    seconds, tokens, flops = 0.0, 0, 0.0
    for _ in range(cfg.max_sampling_rounds if cfg.dynamic_sampling else 1):
        idx = to_device(torch.randint(len(train_prompts), (P,), generator=cpu_gen), device)
        prompts = train_prompts[idx].repeat_interleave(G, dim=0)           # [B, Lp], groups contiguous
        _sync(device); t0 = time.perf_counter()
        with compute_precision(cfg.sampler_precision or cfg.precision, device):
            roll = sampler.rollout(prompts, T_max, temperature=cfg.temperature, generator=gen,
                                   logits_noise=noise, stop_check_every=stop_check_every(device))
        _sync(device); seconds += time.perf_counter() - t0
        tokens += roll.responses.numel()
        Lp = prompts.shape[1]
        flops += P * G * (Lp + roll.steps - 1) * flops_per_token((Lp + roll.steps) / 2)
        ok = task.verifiers["exact"](prompts, roll.responses)                 # [B] 0/1, exact
        passed = ok if cfg.verifier == "exact" else task.verifiers[cfg.verifier](prompts, roll.responses)
        n_tok = roll.mask.sum(dim=1)                                          # [B]
        rolls.append(roll); correct.append(ok); lengths.append(n_tok)
        truncated.append(~((roll.responses == sampler.eos_id) & roll.mask).any(dim=1))
        formatted = task.verifiers["format"](prompts, roll.responses) if cfg.format_weight else None
        shaped.append(shaped_rewards(cfg, passed, n_tok, formatted))
        if sort is not None:
            sorted_.append(sort(prompts, roll.responses))
        if not cfg.dynamic_sampling:
            break
        if sum(int(advantages.signal_groups(r, G).sum()) for r in shaped) >= P:
            break
    batch = select_groups(rolls, shaped, P, G, filter_signal=cfg.dynamic_sampling, eos_id=sampler.eos_id,
                          pad_id=sampler.pad_id)
    categories = {name: torch.cat([c[name] for c in sorted_]) for name in sorted_[0]} if sorted_ else {}
    return Collected(batch, torch.cat(shaped), torch.cat(correct), torch.cat(lengths),
                     torch.cat(truncated), seconds, tokens, flops, categories)


# ----------------------------------------------------------------------------------------------
# 2. the update (the loss and its constants: loss_step.py)
# ----------------------------------------------------------------------------------------------
def split_backward(cfg: RunConfig, setup: LossSetup, model: Policy, batch: Batch, tg: BatchTargets,
                   rows: Tensor, dp: DataParallel | None) -> tuple[Tensor, Tensor, Tensor | None, dict]:
    """One optimiser step's backward on ``rows`` in ``cfg.micro_batches`` pieces (on this rank's rows
    of a data-parallel run): each piece's loss times ``split.piece_scale`` (its count over the
    minibatch's, all-reduced over ranks, times R), so the accumulated gradient, after DDP's average,
    is the whole minibatch's. ``tg``: the batch's targets, asked by each piece's loss forward. Returns what ``policy_loss`` returns for the minibatch: the losses as
    this rank's scaled sum (their mean over ranks is the minibatch's loss), the other stats weighted
    by each piece's share of the tokens."""
    from . import split as S
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
            total, pg_loss, kl_term, stats = policy_loss(cfg, setup, logp, batch,
                                                         tg.for_rows(piece, logp.detach(), logp_all.detach()),
                                                         piece, logp_all)
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


def update(cfg: RunConfig, setup: LossSetup, model: Policy, opt, batch: Batch, tg: BatchTargets,
           cpu_gen: torch.Generator, lr_for: Callable[[], float],
           after_step: Callable[[], None] = lambda: None, dp: DataParallel | None = None) -> dict:
    """Epochs x minibatches of whole groups, one optimiser step each -> the update's metrics (tensors
    where computed on the device).

    ``tg``: the batch's targets (``loss_step.BatchTargets``), asked by each loss forward with its own
    log-probs. With micro-batches or ``dp`` (this rank's share of a data-parallel batch) each step's
    backward is ``split_backward``'s."""
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
                    total, pg_loss, kl_term, stats = policy_loss(
                        cfg, setup, logp, batch, tg.for_rows(rows, logp.detach(), logp_all.detach()), rows, logp_all)
                    total.backward()
                else:
                    total, pg_loss, kl_term, stats = split_backward(cfg, setup, model, batch, tg, rows, dp)
                gnorm = torch.nn.utils.clip_grad_norm_(model.trainable_parameters(), cfg.grad_clip)
                opt.step()
                opt.zero_grad(set_to_none=True)      # the gradients' memory is free until the next backward
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


def learn(cfg: RunConfig, setup: LossSetup, model: Policy, ref_model: Policy, opt, batch: Batch,
          cpu_gen: torch.Generator, lr_for: Callable[[], float], after_step: Callable[[], None] = lambda: None,
          *, with_ref: bool = True, dp: DataParallel | None = None) -> dict:
    """One batch learned: its targets (advantages, pi_old, pi_ref, corrections: ``BatchTargets``), then
    ``update`` -> the step's learning metrics, tensors among them.

    With ``reuses_loss_forward(cfg)`` there is no separate pi_old forward: the targets read the loss
    forward's own log-probs, except on a step that also runs the reference with micro-batches (a KL term, an
    evaluation step): there pi_old is computed ahead, without gradient, in the same pass as pi_ref, so that
    the reference's forward never runs while a micro-batch's activations wait for their backward
    (``BatchTargets``' "ahead"). ``with_ref``: run the reference forward (needed by a KL term; the trainer
    also runs it on evaluation steps and with ``monitor_kl_ref``)."""
    device = batch.mask.device
    _sync(device); t0 = time.perf_counter()
    tg = BatchTargets(cfg, setup, model, ref_model, batch, with_ref=with_ref, dp=dp)
    learned = update(cfg, setup, model, opt, batch, tg, cpu_gen, lr_for, after_step, dp)
    _sync(device); t_learn = time.perf_counter() - t0 - tg.seconds
    tokens = learned.pop("learn_tokens")
    ctx = batch.prompts.shape[1] + batch.responses.shape[1]
    passes = int(tg.separate_forward) + int(with_ref)                                   # without gradient
    target_metrics = token_means_over_ranks(tg.metrics(), TOKEN_MEANS, batch.mask, dp)
    return {**reduce_over_ranks({**target_metrics, **learned}, dp), "time/learn_s": t_learn,
            "time/targets_s": tg.seconds,
            "speed/learn_tok_s": tokens / max(t_learn, 1e-9),
            "flops/targets": passes * len(batch.rewards) * (ctx - 1)
            * model.flops_per_token(ctx / 2, backward=False)}


# ----------------------------------------------------------------------------------------------
# the loop
# ----------------------------------------------------------------------------------------------
def train(cfg: RunConfig, *, progress: bool = True, desc: str | None = None, stop_after: int | None = None,
          dtype: torch.dtype = torch.float32, checkpoint: Checkpoint | None = None,
          on_step: Callable[[dict], None] | None = None) -> History:
    """Warm-start the policy, run ``cfg.steps`` RL steps, return the History of metrics.

    ``progress``: a bar for RL, up from the first second and naming what runs before step 1 (loading the
    policy, the held-out measurement before training), and one for the toy's warm start (in a notebook, each
    one line whose final state stays in the stored output). ``stop_after``: run only the first that many steps
    of the config's schedule (the rows are those of the full run; tests use it). ``dtype``: the policy's
    parameters and every float the update computes; float32 is what the chapters run. float64 with
    a short warm start makes the first steps agree across CPUs to about 1e-11 (``toy.fingerprint``);
    a full warm start amplifies even float64 rounding until runs part. ``checkpoint``: write the run's state
    to a file every few steps, or go on from one (``checkpoint.Checkpoint``; one process only). ``on_step``:
    called with each step's row once the step is done, outside the step's clock (``time/step_s``;
    ``time/elapsed_s`` counts it): benchmarks/trl_real.py hands the CPU to TRL's trainer there.
    """
    check_checkpoint(checkpoint, cfg)
    for phase in cfg.phases():
        if (why := clip_cannot_bind(phase)) is not None:
            warnings.warn(why, ClipCannotBindWarning, stacklevel=2)
    device = cfg.resolved_device()
    torch.set_flush_denormal(True)          # collapsed-entropy runs otherwise crawl on denormals
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    R, rank = cfg.world_size, this_rank(cfg)        # one rank of train_distributed's process group when R > 1
    task = make_task(cfg)
    train_prompts = task.prompts("train").to(device)
    held_prompts = task.prompts("heldout").to(device)

    n_steps = cfg.steps if stop_after is None else min(stop_after, cfg.steps)
    bar = progress_bar(n_steps, desc or str(cfg.loss), progress)     # from the first second: what runs now
    bar.set_postfix_str("loading the policy", refresh=True)
    model, state, warm_s = initial_policy(cfg, device, dtype, progress=progress)
    ref_model = model.reference()                   # pi_ref (rl.policy.Policy.reference)
    dp = wrap(model, rank, R)                       # DDP on a rank; None in one process
    local = functools.cache(lambda c: rank_share(c, R))   # this rank's share of a phase's config
    samplers = Samplers(cfg.phases(), model, state)  # one per mismatch the run's phases use
    setup_for = functools.cache(loss_setup)         # the loss of each phase, built once
    opt = torch.optim.AdamW(model.trainable_parameters(), lr=cfg.lr, betas=ADAM_BETAS, weight_decay=WEIGHT_DECAY,
                            fused=True if device.type == "cuda" else None)   # one kernel per step on a GPU
    schedule = LrSchedule(cfg)

    torch.manual_seed(cfg.seed)
    # each rank draws its own prompts and samples (rank 0's are a single-process run's)
    gen = torch.Generator(device=device).manual_seed(cfg.seed + 7_919 * rank)       # sampling noise
    cpu_gen = torch.Generator().manual_seed(cfg.seed + 10_000 + 7_919 * rank)       # prompts, minibatch order
    flops_per_token = lambda ctx: model.flops_per_token(ctx, backward=False)   # noqa: E731

    hist, done, drawn = History(config=config_record(cfg), warm_start_s=warm_s), 0, 0
    held = dict(model=model, ref_model=ref_model, opt=opt, schedule=schedule, samplers=samplers,
                gens={"sampling": gen, "cpu": cpu_gen})               # what a checkpoint holds besides the rows
    if checkpoint is not None and checkpoint.resume:                 # go on after an earlier run's last step
        done, hist, drawn = restore_checkpoint(checkpoint, cfg, **held)
    else:
        bar.set_postfix_str(f"held-out accuracy before training ({len(held_prompts)} questions)", refresh=True)
        hist.rows.append({"step": 0, "acc/heldout": heldout_accuracy(model, held_prompts, cfg.max_new_tokens,
                                                                     cfg.precision, task.verifiers["exact"]),
                          "samples/drawn": 0, "time/elapsed_s": 0.0, "time/elapsed_cpu_s": 0.0})
        bar.set_postfix_str(f"held-out acc {hist.rows[0]['acc/heldout']:.3f} before training", refresh=True)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    bar.update(done)
    for step in range(done + 1, n_steps + 1):
        t_step = time.perf_counter()
        now_cfg = cfg.at(step)                                        # the knobs in force this step
        # ---- 1. sample ------------------------------------------------------------------------
        sampler = samplers.for_step(now_cfg, model)
        got = collect(local(now_cfg), sampler, train_prompts, gen, cpu_gen, flops_per_token)
        drawn += len(got.rewards) * R
        row = {"step": step, **sampling_metrics(gather_collected(got, dp), cfg.group_size), "samples/drawn": drawn}

        # ---- 2. learn: pi_old, pi_ref, advantages, corrections; then the optimiser steps -----
        evaluating = step % cfg.eval_every == 0 or step == cfg.steps
        if got.batch is not None:                                     # else nothing to learn from
            row.update(learn(local(now_cfg), setup_for(now_cfg), model, ref_model, opt, got.batch, cpu_gen,
                             lambda: schedule.next_lr(now_cfg), lambda: samplers.after_opt_step(model),
                             with_ref=now_cfg.kl_coef > 0 or now_cfg.monitor_kl_ref or evaluating, dp=dp))

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
        if checkpoint is not None and checkpoint.due(step, n_steps):
            save_checkpoint(checkpoint, step=step, hist=hist, drawn=drawn, **held)
        if model.returns_freed_memory:                        # the real model: its freed blocks, not kept as gaps
            return_freed_memory(device)
        bar.update(1)
        if on_step is not None:
            on_step(row)
    bar.close()
    hist.final_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return hist


def _train_rank(rank: int, world_size: int, cfg: RunConfig) -> History | None:
    hist = train(cfg, progress=False)
    return hist if rank == 0 else None


def train_distributed(cfg: RunConfig, *, timeout_s: float = 1800.0) -> History:
    """``train(cfg)`` on ``cfg.world_size`` gloo processes (``ranks.run_ranks``), DDP averaging the
    ranks' gradients: each rank samples prompts_per_step / world_size groups with its own seed, learns on
    them (in ``micro_batches`` pieces), and every rank holds the same weights after each step. An
    estimator whose statistics span the batch (REINFORCE++, GPG, the batch's std) reads every rank's
    rewards (``data_parallel.whole_batch``). Returns rank 0's History: the sampling metrics are the
    whole batch's, the learning ones too (means weighted by each rank's tokens, ``reduce_over_ranks``;
    the mismatch p99 is the mean of the ranks' quantiles), the held-out accuracy that of the common
    weights; times, token counts and FLOPs are rank 0's own. Called from a script, it must run under
    ``if __name__ == "__main__":`` (the ranks start from a fork server that re-imports the main module)."""
    if cfg.world_size < 2:
        raise ValueError(f"world_size must be >= 2 for train_distributed (1: call train), got {cfg.world_size}")
    return run_ranks(_train_rank, cfg.world_size, cfg, timeout_s=timeout_s)[0]
