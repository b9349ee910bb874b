"""``train(config) -> History``: GRPO-family RL on the addition task, calling course_lib's pieces.

One step, top to bottom (ALGO marks the lines that are the algorithm, the rest is plumbing):
  1. sample P prompts x G responses with the sampler (possibly mismatched to the learner);
     with dynamic sampling, drop zero-signal groups and sample again until P groups remain
  2. reward = correctness (+ rewards.overlong_penalty), advantage = advantages.group_advantages
     (or rloo_advantages) per group
  3. the learner recomputes log pi_old (no grad), log pi_ref, entropy and KL metrics;
     corrections.correction_weights gives the TIS/MIS weight against the sampler's log-probs
  4. for each epoch and minibatch of whole groups: loss = loss_fn(logp, old_logp, adv, mask,
     **knobs, is_weight=w) + beta * aggregate(kl_estimate(logp, ref_logp, mask, kind), mask, agg)
The loss functions come from ``losses.resolve_loss`` (a registered name or a callable): this file
contains no loss, advantage, aggregation, KL or correction formula of its own.
"""
from __future__ import annotations

import collections
import copy
import inspect
import json
import math
import time
from dataclasses import asdict, dataclass, field

import torch
from tqdm.auto import tqdm

from .. import advantages, corrections, kl, losses, rewards
from ..aggregation import aggregate
from ..masking import masked_mean
from ..metrics import check_keys
from .config import ToyConfig
from .policy import TinyGPT, response_logits, sample, token_logp
from .task import PAD, PROMPT_LEN, AdditionTask, imperfect_answers

KNOB_FIELDS = ("eps_low", "eps_high", "dual_clip", "tau_pos", "tau_neg", "agg")


# ----------------------------------------------------------------------------------------------
# History
# ----------------------------------------------------------------------------------------------
@dataclass
class History:
    """One row of metrics per RL step (row 0: before RL), keys defined in ``metrics.METRICS``."""
    config: dict
    rows: list = field(default_factory=list)
    warm_start_s: float = 0.0
    final_state: dict | None = field(default=None, repr=False)   # trained weights (CPU); not saved

    def series(self, key: str):
        """(steps, values) as float lists, skipping steps where the key is missing or NaN."""
        xs, ys = [], []
        for r in self.rows:
            v = r.get(key)
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                xs.append(r["step"])
                ys.append(float(v))
        return xs, ys

    def first(self, key: str) -> float:
        ys = self.series(key)[1]
        return ys[0] if ys else float("nan")

    def last(self, key: str) -> float:
        ys = self.series(key)[1]
        return ys[-1] if ys else float("nan")

    def mean(self, key: str, last_n: int | None = None) -> float:
        ys = self.series(key)[1]
        ys = ys[-last_n:] if last_n else ys
        return sum(ys) / len(ys) if ys else float("nan")

    def to_json(self) -> dict:
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                 for r in self.rows]
        return {"config": self.config, "rows": clean, "warm_start_s": self.warm_start_s}

    @classmethod
    def from_json(cls, d: dict) -> "History":
        rows = [{k: (float("nan") if v is None else v) for k, v in r.items()} for r in d["rows"]]
        return cls(config=d["config"], rows=rows, warm_start_s=d.get("warm_start_s", 0.0))


def config_record(cfg: ToyConfig) -> dict:
    """The config as JSON-friendly values (a callable loss is recorded by its name)."""
    d = asdict(cfg)
    if callable(d["loss"]):
        d["loss"] = getattr(d["loss"], "__name__", repr(d["loss"]))
    return d


# ----------------------------------------------------------------------------------------------
# pieces
# ----------------------------------------------------------------------------------------------
def build_model(cfg: ToyConfig) -> TinyGPT:
    return TinyGPT(cfg.n_layer, cfg.d_model, cfg.n_head, block_size=PROMPT_LEN + cfg.max_new_tokens)


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


_WARM_CACHE: dict = {}


def warm_start(cfg: ToyConfig, device: torch.device | None = None) -> tuple[dict, float]:
    """Supervised warm start on deliberately imperfect answers -> (state_dict on CPU, seconds).

    Cached per process by the fields it depends on, so runs that differ only in RL knobs start
    from the same policy and pay for it once.
    """
    device = device or cfg.resolved_device()
    key = (cfg.n_layer, cfg.d_model, cfg.n_head, cfg.max_new_tokens, cfg.warm_steps, cfg.warm_batch,
           cfg.warm_lr, cfg.warm_noise, cfg.warm_target, cfg.warm_seed, cfg.n_heldout, device.type)
    if key in _WARM_CACHE:
        return _WARM_CACHE[key]
    t0 = time.perf_counter()
    torch.manual_seed(cfg.warm_seed)
    model = build_model(cfg).to(device)
    g = torch.Generator().manual_seed(cfg.warm_seed)
    train_prompts = AdditionTask(n_heldout=cfg.n_heldout).prompts("train")
    probe = train_prompts[:512].to(device)          # training prompts: the held-out set stays unseen
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warm_lr, weight_decay=0.0)
    for step in range(cfg.warm_steps):
        if (cfg.warm_target is not None and step % 10 == 0
                and heldout_accuracy(model, probe, cfg.max_new_tokens) >= cfg.warm_target):
            break
        for group in opt.param_groups:
            group["lr"] = cfg.warm_lr * min(1.0, (step + 1) / 10)
        idx = torch.randint(len(train_prompts), (cfg.warm_batch,), generator=g)
        prompts = train_prompts[idx]
        answers = imperfect_answers(prompts, cfg.warm_noise, g, cfg.max_new_tokens)
        seq = torch.cat([prompts, answers], dim=1).to(device)                 # [N, Lp + T]
        logits = model(seq[:, :-1])[:, PROMPT_LEN - 1:]                        # [N, T, V]
        target = seq[:, PROMPT_LEN:]                                           # [N, T]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 target.reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    _WARM_CACHE[key] = (state, time.perf_counter() - t0)
    return _WARM_CACHE[key]


@torch.no_grad()
def heldout_accuracy(model: TinyGPT, prompts: torch.Tensor, max_new_tokens: int) -> float:
    """Greedy-decoding accuracy on the given prompts."""
    roll = sample(model, prompts, max_new_tokens, greedy=True)
    return float(AdditionTask.reward(prompts, roll.responses).mean())


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


def _pad_cat(tensors: list, value) -> torch.Tensor:
    """Concatenate [B_i, T_i] tensors along B, right-padding each to the largest T with value."""
    T = max(t.shape[1] for t in tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, T - t.shape[1]), value=value) for t in tensors])


# ----------------------------------------------------------------------------------------------
# the loop
# ----------------------------------------------------------------------------------------------
def train(cfg: ToyConfig, *, progress: bool = True, desc: str | None = None) -> History:
    """Warm-start the policy, run ``cfg.steps`` RL steps, return the History of metrics."""
    device = cfg.resolved_device()
    torch.set_flush_denormal(True)          # collapsed-entropy runs otherwise crawl on denormals
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    task = AdditionTask(n_heldout=cfg.n_heldout)
    train_prompts = task.prompts("train").to(device)
    held_prompts = task.prompts("heldout").to(device)
    P, G, T_max = cfg.prompts_per_step, cfg.group_size, cfg.max_new_tokens

    state, warm_s = warm_start(cfg, device)
    model = build_model(cfg).to(device)
    model.load_state_dict(state)
    ref_model = copy.deepcopy(model).requires_grad_(False)
    sampler = model
    if cfg.mismatch in ("bf16", "stale"):
        sampler = copy.deepcopy(model).requires_grad_(False)
        if cfg.mismatch == "bf16":
            sampler = sampler.to(torch.bfloat16)
    snapshots = collections.deque([copy.deepcopy(state)], maxlen=cfg.stale_steps + 1)

    loss_fn = losses.resolve_loss(cfg.loss)
    knobs, agg = loss_knobs(loss_fn, cfg)
    is_dr = cfg.loss == "dr_grpo"
    std_scaling = (not is_dr) if cfg.std_scaling is None else cfg.std_scaling
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.99), weight_decay=0.0)
    total_opt_steps = cfg.steps * cfg.epochs * cfg.minibatches
    opt_step = 0

    torch.manual_seed(cfg.seed)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)       # sampling noise
    cpu_gen = torch.Generator().manual_seed(cfg.seed + 10_000)       # prompt choice, minibatch order
    noise = cfg.logits_noise if cfg.mismatch == "noise" else 0.0

    hist = History(config=config_record(cfg), warm_start_s=warm_s)
    hist.rows.append({"step": 0, "acc/heldout": heldout_accuracy(model, held_prompts, T_max),
                      "samples/drawn": 0, "time/elapsed_s": 0.0, "time/elapsed_cpu_s": 0.0})
    drawn, t_start, cpu_start = 0, time.perf_counter(), time.process_time()
    bar = tqdm(range(1, cfg.steps + 1), desc=desc or str(cfg.loss), disable=not progress,
               leave=True, mininterval=1.0)
    for step in bar:
        t_step = time.perf_counter()
        # ---- 1. sample (plumbing: which weights the sampler has) ----------------------------
        if cfg.mismatch == "stale":
            sampler.load_state_dict(snapshots[0])
        elif cfg.mismatch == "bf16":
            sampler.load_state_dict(model.state_dict())               # cast to bfloat16 on copy
        kept, all_rewards, all_correct, all_len, n_groups, t_sample, sample_tok, flops_sample = \
            [], [], [], [], 0, 0.0, 0, 0.0
        for _ in range(cfg.max_sampling_rounds if cfg.dynamic_sampling else 1):
            idx = torch.randint(len(train_prompts), (P,), generator=cpu_gen).to(device)
            prompts = train_prompts[idx].repeat_interleave(G, dim=0)             # [B, Lp], groups contiguous
            _sync(device); t0 = time.perf_counter()
            roll = sample(sampler, prompts, T_max, temperature=cfg.temperature, generator=gen,
                          logits_noise=noise)
            _sync(device); t_sample += time.perf_counter() - t0
            sample_tok += roll.responses.numel()
            flops_sample += (P * G * (PROMPT_LEN + roll.steps - 1)
                             * model.flops_per_token((PROMPT_LEN + roll.steps) / 2, backward=False))
            correct = task.reward(prompts, roll.responses)                         # [B] 0/1
            lengths = roll.mask.sum(dim=1)                                         # [B]
            r = correct.clone()
            if cfg.overlong_penalty:                                              # ALGO: DAPO Eq. 13
                r = r + rewards.overlong_penalty(lengths, T_max, cfg.overlong_cache)
            signal = advantages.signal_groups(r, G)                               # [P]
            all_rewards.append(r); all_correct.append(correct); all_len.append(lengths)
            n_groups += P
            if cfg.dynamic_sampling:                                              # ALGO: DAPO §3.2
                rows = signal.repeat_interleave(G)
                kept.append((roll, r, rows))
                if sum(int(k[2].sum()) for k in kept) >= P * G:
                    break
            else:
                kept.append((roll, r, torch.ones_like(r, dtype=torch.bool)))
        drawn += len(all_rewards) * P * G
        rew, cor, lens = torch.cat(all_rewards), torch.cat(all_correct), torch.cat(all_len)
        row = {"step": step, "reward/mean": float(rew.mean()), "acc/sampled": float(cor.mean()),
               "len/all": float(lens.float().mean()),
               "len/correct": float(lens[cor > 0].float().mean()) if (cor > 0).any() else float("nan"),
               "len/wrong": float(lens[cor == 0].float().mean()) if (cor == 0).any() else float("nan"),
               "groups/zero_signal_frac": 1.0 - float(advantages.signal_groups(rew, G).float().sum()) / n_groups,
               "samples/step": len(all_rewards) * P * G, "samples/drawn": drawn,
               "time/sample_s": t_sample, "speed/sample_tok_s": sample_tok / max(t_sample, 1e-9),
               "flops/sample": flops_sample}

        prompts = torch.cat([k[0].prompts[k[2]] for k in kept])
        responses = _pad_cat([k[0].responses[k[2]] for k in kept], PAD)
        mask = _pad_cat([k[0].mask[k[2]] for k in kept], False)
        rollout_logp = _pad_cat([k[0].rollout_logp[k[2]] for k in kept], 0.0)
        r = torch.cat([k[1][k[2]] for k in kept])
        n_keep = min(len(r) // G, P)
        prompts, responses, mask, rollout_logp, r = (x[: n_keep * G] for x in
                                                     (prompts, responses, mask, rollout_logp, r))
        if n_keep == 0:                                       # nothing to learn from this step
            hist.rows.append(_finish_row(row, cfg, model, held_prompts, step, t_step, t_start, cpu_start))
            continue

        # ---- 2. advantages (ALGO) -----------------------------------------------------------
        if cfg.adv_estimator == "rloo":
            adv = advantages.rloo_advantages(r, G)                                 # [B]
        else:
            adv = advantages.group_advantages(r, G, scale=std_scaling)             # [B]

        # ---- 3. learner recomputes pi_old, pi_ref; correction weights (ALGO) ---------------
        with torch.no_grad():
            learner_logp, logp_all = token_logp(response_logits(model, prompts, responses),
                                                responses, cfg.temperature)       # [B, T], [B, T, V]
            ref_logp, ref_all = token_logp(response_logits(ref_model, prompts, responses),
                                           responses, cfg.temperature)
            entropy = -(logp_all.exp() * logp_all).sum(-1)                         # [B, T]
            row["entropy/mean"] = float(masked_mean(entropy, mask))
            row["kl/ref"] = float(masked_mean(kl.categorical_kl(logp_all, ref_all), mask))
            gap = (learner_logp - rollout_logp).abs()[mask]
            row["mismatch/abs_logratio_p99"] = float(torch.quantile(gap.float(), 0.99)) if gap.numel() else 0.0
            row["mismatch/abs_logratio_max"] = float(gap.max()) if gap.numel() else 0.0
        old_logp = learner_logp if cfg.old_logp_source == "learner" else rollout_logp
        is_weight = corrections.correction_weights(cfg.correction, learner_logp, rollout_logp, mask,
                                                   cfg.correction_cap, cfg.correction_level)
        row["is/weight_mean"] = 1.0 if is_weight is None else float(masked_mean(is_weight, mask))
        row["is/zero_frac"] = 0.0 if is_weight is None else float(masked_mean((is_weight == 0).float(), mask))
        row["adv/pos_token_frac"] = float(masked_mean((adv[:, None] > 0).expand_as(mask).float(), mask))

        # ---- 4. policy update: epochs x minibatches of whole groups ---------------------------
        _sync(device); t0 = time.perf_counter()
        sums: dict = collections.defaultdict(float)
        ratio_max, n_updates, learn_tok, flops_learn = 0.0, 0, 0, 0.0
        mb_groups = max(n_keep // cfg.minibatches, 1)
        for _ in range(cfg.epochs):
            order = torch.randperm(n_keep, generator=cpu_gen)
            for start in range(0, n_keep, mb_groups):
                grp = order[start: start + mb_groups]
                rows = (grp[:, None] * G + torch.arange(G)).reshape(-1).to(device)   # [b]
                m = mask[rows]
                logp, _ = token_logp(response_logits(model, prompts[rows], responses[rows]),
                                     responses[rows], cfg.temperature)             # [b, T]
                w = None if is_weight is None else is_weight[rows]
                extra = {} if w is None else {"is_weight": w}
                pg_loss, stats = loss_fn(logp, old_logp[rows], adv[rows], m, **knobs, **extra)
                total = pg_loss
                if cfg.kl_coef > 0:                                                # ALGO: KL in the loss
                    kl_term = aggregate(kl.kl_estimate(logp, ref_logp[rows], m, cfg.kl_estimator),
                                        m, agg, cfg.max_new_tokens if agg == "seq-mean-token-sum-norm" else None)
                    total = pg_loss + cfg.kl_coef * kl_term
                    sums["kl/penalty"] += float(kl_term.detach())
                lr = lr_at(cfg, opt_step, total_opt_steps)
                for group in opt.param_groups:
                    group["lr"] = lr
                opt.zero_grad(set_to_none=True)
                total.backward()
                gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
                opt_step += 1
                if cfg.mismatch == "stale":
                    snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
                sums["loss/policy"] += float(pg_loss.detach())
                sums["loss/total"] += float(total.detach())
                sums["grad/norm"] += float(gnorm)
                for k, v in stats.items():
                    if k == "ratio/max":
                        ratio_max = max(ratio_max, v)
                    else:
                        sums[k] += v
                n_updates += 1
                n_tok = len(rows) * (PROMPT_LEN + responses.shape[1] - 1)
                learn_tok += n_tok
                flops_learn += n_tok * model.flops_per_token((PROMPT_LEN + responses.shape[1]) / 2)
        _sync(device); t_learn = time.perf_counter() - t0
        row.update({k: v / n_updates for k, v in sums.items()})
        row.setdefault("kl/penalty", 0.0)
        row.update({"ratio/max": ratio_max, "lr": lr, "time/learn_s": t_learn,
                    "speed/learn_tok_s": learn_tok / max(t_learn, 1e-9), "flops/learn": flops_learn})
        hist.rows.append(_finish_row(row, cfg, model, held_prompts, step, t_step, t_start, cpu_start))
        if progress and "acc/heldout" in hist.rows[-1]:
            bar.set_postfix_str(f"held-out acc {hist.rows[-1]['acc/heldout']:.3f}")
    bar.close()
    hist.final_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return hist


def _finish_row(row: dict, cfg: ToyConfig, model: TinyGPT, held_prompts, step: int,
                t_step: float, t_start: float, cpu_start: float) -> dict:
    if step % cfg.eval_every == 0 or step == cfg.steps:
        row["acc/heldout"] = heldout_accuracy(model, held_prompts, cfg.max_new_tokens)
    now = time.perf_counter()
    row["time/step_s"] = now - t_step
    row["time/elapsed_s"] = now - t_start
    row["time/elapsed_cpu_s"] = time.process_time() - cpu_start
    check_keys(k for k in row if k != "step")
    return row


def save_histories(path, histories: dict) -> None:
    """Write {name: History or [History, ...]} to a JSON file."""
    out = {name: ([h.to_json() for h in v] if isinstance(v, list) else v.to_json())
           for name, v in histories.items()}
    with open(path, "w") as f:
        json.dump(out, f)


def load_histories(path) -> dict:
    with open(path) as f:
        raw = json.load(f)
    return {name: ([History.from_json(h) for h in v] if isinstance(v, list) else History.from_json(v))
            for name, v in raw.items()}
