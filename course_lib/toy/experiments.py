"""The comparisons of chapter 07: each a claim from a paper, a base config and the variants to run
side by side with the same seeds. The notebook runs short versions live; ``benchmarks/toy_results.py``
runs them longer, over several seeds, and stores small JSON result files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..losses import available_losses, framework_losses
from ..rl.config import RunConfig, make_config
from ..rl.history import History, from_columns, load_results, to_columns  # noqa: F401 (re-exported)
from ..rl.trainer import train


@dataclass(frozen=True)
class Comparison:
    claim: str                 # what the papers say, as a testable statement
    metric: str                # the metric that tests it
    variants: dict             # label -> config overrides
    base: dict = field(default_factory=dict)
    x: str = "step"            # x axis of the curves: "step" or "samples/drawn"
    keys: tuple = ()           # metrics the chapter tables and plots, the tested one first
    seeds: tuple = (0, 1, 2)   # what benchmarks/toy_results.py stores unless told otherwise
    steps: int = 200
    passk: tuple = ()          # (n, prompts): also count right answers among n samples per held-out
                               # prompt, before and after RL (``long_answers.passk_counts``)

    def __post_init__(self):
        if self.keys and self.keys[0] != self.metric:
            raise ValueError(f"keys must start with the tested metric {self.metric!r}, got {self.keys!r}")
        if self.passk and not (len(self.passk) == 2 and all(isinstance(v, int) and v >= 1 for v in self.passk)):
            raise ValueError(f"passk must be (samples per prompt, prompts), two ints >= 1, got {self.passk!r}")

    def configs(self, base: RunConfig, *, seed: int, steps: int | None = None) -> dict:
        """{label: config}; every stored run records the kl/ref monitor at every step (the chapters
        plot it), so the reference forward runs every step here even without a KL term."""
        cfg = replace(base, monitor_kl_ref=True, **self.base, seed=seed, **({"steps": steps} if steps else {}))
        return {label: replace(cfg, **kw) for label, kw in self.variants.items()}


# the advantage estimators beside GRPO's and RLOO's that the toy trainer runs (``RunConfig.adv_estimator``)
ESTIMATOR_LABELS = {"reinforce_pp": "REINFORCE++", "reinforce_pp_baseline": "REINFORCE++ (baseline)",
                    "remax": "ReMax", "opo": "OPO", "passk": "pass@k"}

# several optimiser steps per batch at lr 5e-4 (lr 1e-3 with 4 minibatches made reward fall)
MULTI = dict(minibatches=4, lr=5e-4)

COMPARISONS: dict[str, Comparison] = {
    "clip_higher": Comparison(
        claim="Clip-Higher (eps_high 0.28 > eps_low 0.2) keeps the policy's entropy higher and "
              "reaches a higher accuracy than the symmetric clip (DAPO §3.1).",
        metric="entropy/mean",
        keys=("entropy/mean", "acc/heldout", "clip/high_frac", "clip/low_frac"),
        base=dict(loss="ppo", **MULTI),
        variants={"symmetric 0.2 / 0.2": dict(eps_high=0.2),
                  "Clip-Higher 0.2 / 0.28": dict(eps_high=0.28)}),
    "aggregation": Comparison(
        claim="With the sequence mean (GRPO) a long wrong answer is penalised less per token than "
              "with the token mean (DAPO), so wrong answers grow longer (DAPO §3.3, Dr. GRPO).",
        metric="len/wrong",
        keys=("len/wrong", "len/correct", "acc/heldout"),
        base=dict(loss="ppo"),
        variants={"seq-mean-token-mean": dict(agg="seq-mean-token-mean"),
                  "token-mean": dict(agg="token-mean")}),
    "multi_step": Comparison(
        claim="With 4 gradient steps per batch and a noisy pi_old, CISPO (clipped weight, gradient "
              "everywhere) learns faster than token-clip PPO and GSPO, which drop clipped tokens.",
        metric="acc/heldout",
        keys=("acc/heldout", "clip/low_frac", "clip/high_frac", "clip_seq/low_frac"),
        base=dict(**MULTI, mismatch="noise", logits_noise=0.5, old_logp_source="sampler"),
        variants={"PPO token clip": dict(loss="ppo"),
                  "GSPO": dict(loss="gspo"),
                  "CISPO": dict(loss="cispo"),
                  # the papers' own setting: pi_old recomputed by the learner, no sampler noise
                  **{f"{name}, exact pi_old": dict(loss=loss, mismatch="none", old_logp_source="learner")
                     for name, loss in (("PPO", "ppo"), ("GSPO", "gspo"), ("CISPO", "cispo"))}}),
    "stale_sampler": Comparison(
        claim="A sampler one optimiser step stale (1-step asynchronous RL) biases the update; "
              "truncated IS (TIS) removes most of the damage, masked IS (MIS) part of it.",
        metric="acc/heldout",
        keys=("acc/heldout", "mismatch/abs_logratio_p99", "is/weight_mean", "is/zero_frac"),
        base=dict(loss="ppo", mismatch="stale", stale_steps=1),
        variants={"fresh sampler": dict(mismatch="none"),
                  "stale, no correction": dict(correction="none"),
                  "stale + TIS (cap 2)": dict(correction="tis"),
                  "stale + MIS (cap 2)": dict(correction="mis")}),
    "naive_old_logp": Comparison(
        claim="Under sampler noise, taking pi_old from the sampler's log-probs (verl's bypass mode: "
              "no recompute) trains worse than recomputing pi_old with the learner, with or without "
              "a TIS correction for the sampler.",
        metric="acc/heldout",
        keys=("acc/heldout", "clip/low_frac", "clip/high_frac", "is/weight_mean"),
        base=dict(loss="ppo", mismatch="noise", logits_noise=0.5),
        variants={"pi_old recomputed by the learner": dict(old_logp_source="learner"),
                  "pi_old = sampler log-probs": dict(old_logp_source="sampler"),
                  "recomputed + TIS (cap 2)": dict(old_logp_source="learner", correction="tis")}),
    "dynamic_sampling": Comparison(
        claim="Dynamic sampling (drop zero-signal groups, sample more) raises accuracy per step; "
              "per response sampled it costs what it gains (DAPO §3.2).",
        metric="acc/heldout",
        x="samples/drawn",
        keys=("acc/heldout", "groups/zero_signal_frac"),
        base=dict(loss="dapo"),
        variants={"dynamic sampling off": dict(dynamic_sampling=False),
                  "dynamic sampling on": dict(dynamic_sampling=True)}),
    "temperature_group": Comparison(
        claim="Lower temperature and smaller groups give more zero-signal groups (all G answers "
              "equal), so fewer prompts teach anything; B = P * G is held at 512.",
        metric="groups/zero_signal_frac",
        keys=("groups/zero_signal_frac", "acc/sampled", "acc/heldout"),
        base=dict(loss="grpo"),
        variants={"T 0.7, G 8": dict(temperature=0.7),
                  "T 1.0, G 8": dict(temperature=1.0),
                  "T 1.3, G 8": dict(temperature=1.3),
                  "T 1.0, G 4": dict(group_size=4, prompts_per_step=128),
                  "T 1.0, G 16": dict(group_size=16, prompts_per_step=32)}),
    "precision_mismatch": Comparison(
        claim="A sampler in bfloat16 autocast and a learner in float32 disagree on every token's "
              "log-prob (a real train/inference mismatch, Qi et al. 2025); with pi_old recomputed by the "
              "learner, TIS and MIS reweight the update by that gap.",
        metric="mismatch/abs_logratio_p99",
        keys=("mismatch/abs_logratio_p99", "acc/heldout", "is/weight_mean", "is/zero_frac"),
        steps=100,
        base=dict(loss="grpo", sampler_precision="bf16"),
        variants={"sampler fp32 (= learner)": dict(sampler_precision=None),
                  "sampler bf16, no correction": dict(correction="none"),
                  "sampler bf16 + TIS (cap 2)": dict(correction="tis"),
                  "sampler bf16 + MIS (cap 2)": dict(correction="mis")}),
    "all_losses": Comparison(
        claim="Every loss in the registry and every other policy loss and advantage estimator verl "
              "0.9.1 and TRL 1.16.0 select that the toy can run trains the toy policy with its own "
              "defaults, one gradient step per batch, the same seeds and the same batches.",
        metric="acc/heldout",
        keys=("acc/heldout", "entropy/mean", "len/all"),
        variants={**{name: dict(loss=name) for name in available_losses()},
                  "grpo + RLOO advantages": dict(loss="grpo", adv_estimator="rloo"),
                  **{name: dict(loss=name) for name in framework_losses()},
                  "gpg + GPG advantages": dict(loss="gpg", adv_estimator="gpg"),
                  **{f"grpo + {label} advantages": dict(loss="grpo", adv_estimator=name)
                     for name, label in ESTIMATOR_LABELS.items()}}),
}


def run_comparison(name: str, *, seeds=(0,), steps: int | None = None, base: RunConfig | None = None,
                   only=None, progress: bool = True) -> dict:
    """Train the variants of a comparison (all, or the labels in ``only``) for each seed
    -> {label: [History per seed]}."""
    comp = COMPARISONS[name]
    base = base or make_config("smoke")
    labels = list(comp.variants) if only is None else list(only)
    out: dict = {label: [] for label in labels}
    for seed in seeds:
        for label, cfg in comp.configs(base, seed=seed, steps=steps).items():
            if label not in out:
                continue
            out[label].append(train(cfg, progress=progress, desc=f"{label} (seed {seed})"))
    return out


def thin(h: History, keys, every: int = 1) -> History:
    """A copy of a History with only ``keys`` (plus step), every ``every``-th step and eval steps,
    values rounded to 4 significant digits: small enough to commit."""
    rows = []
    for r in h.rows:
        evaluated = "acc/heldout" in r and r["acc/heldout"] == r["acc/heldout"]     # present, not NaN
        if r["step"] % every == 0 or evaluated:
            rows.append({"step": r["step"], **{k: float(f"{r[k]:.4g}") for k in keys if k in r}})
    return History(config=h.config, rows=rows, warm_start_s=round(h.warm_start_s, 2))


# ----------------------------------------------------------------------------------------------
# mechanisms shown on one batch, where training curves at this scale cannot show them
# ----------------------------------------------------------------------------------------------
class Status:
    """One line of progress, updated in place: in a notebook a display handle, so the stored
    output is the final line (no stalled bar); elsewhere, or with enabled=False, nothing."""

    def __init__(self, desc: str, total: int, enabled: bool = True):
        import time
        self.desc, self.total, self.done, self.t0 = desc, total, 0, time.perf_counter()
        self.handle = None
        if enabled:
            try:
                from IPython import get_ipython
                from IPython.display import display
                if get_ipython() is not None:
                    self.handle = display(self._line("starting"), display_id=True)
            except ImportError:
                pass

    def _line(self, what: str):
        import time

        from IPython.display import Pretty
        return Pretty(f"{self.desc}: {self.done}/{self.total} {what} "
                      f"({time.perf_counter() - self.t0:.0f} s)")

    def step(self, what: str = "") -> None:
        self.done += 1
        if self.handle is not None:
            self.handle.update(self._line(what if self.done < self.total else "done"))


def _addition_only(cfg: RunConfig, what: str) -> None:
    if cfg.task != "addition":
        raise ValueError(f"{what} reads the addition task's prompts and sums; got a config with task={cfg.task!r}")


def _warm_policy(cfg: RunConfig):
    from ..rl.model import build_model
    from .warm_start import warm_start
    device = cfg.resolved_device()
    model = build_model(cfg).to(device)
    model.load_state_dict(warm_start(cfg, device)[0])
    return model, device


def clip_higher_mechanism(cfg: RunConfig, *, eps_highs=(0.2, 0.28), epochs: int = 8,
                          lr: float = 1e-3, low_prob: float = 0.2, seed: int = 0,
                          progress: bool = True) -> dict:
    """Several PPO epochs on one batch from the warm-start policy, once per eps_high.

    Returns {eps_high: {"n": tokens with pi_old < low_prob and A > 0, "p_old": their mean
    probability before, "p_new": after, "high_frac": clip/high_frac of the last epoch}}.
    Same batch, same initial weights, same optimiser: only eps_high differs.
    """
    import copy

    import torch

    from .. import advantages, losses
    from ..rl.policy import response_logits, token_logp
    from .policy import sample
    from .task import AdditionTask
    _addition_only(cfg, "clip_higher_mechanism")
    status = Status("one batch, PPO epochs", len(eps_highs) * epochs, progress)
    model, device = _warm_policy(cfg)
    g = torch.Generator(device=device).manual_seed(seed)
    pick = torch.Generator().manual_seed(seed)
    train_prompts = AdditionTask(heldout_questions=cfg.heldout_questions).prompts("train")
    idx = torch.randint(len(train_prompts), (cfg.prompts_per_step,), generator=pick)
    prompts = train_prompts[idx].repeat_interleave(cfg.group_size, dim=0).to(device)   # [B, Lp]
    roll = sample(model, prompts, cfg.max_new_tokens, temperature=cfg.temperature, generator=g)
    r = AdditionTask.reward(prompts, roll.responses)                                     # [B]
    adv = advantages.group_advantages(r, cfg.group_size)                                 # [B]
    with torch.no_grad():
        old_logp, _ = token_logp(response_logits(model, prompts, roll.responses), roll.responses,
                                 cfg.temperature)                                        # [B, T]
    sel = roll.mask & (old_logp.exp() < low_prob) & (adv[:, None] > 0)                  # [B, T]
    out = {}
    for eh in eps_highs:
        m = copy.deepcopy(model)
        opt = torch.optim.Adam(m.parameters(), lr=lr)
        for _ in range(epochs):
            logp, _ = token_logp(response_logits(m, prompts, roll.responses), roll.responses,
                                 cfg.temperature)
            loss, stats = losses.ppo_loss(logp, old_logp, adv, roll.mask, eps_low=0.2, eps_high=eh)
            opt.zero_grad()
            loss.backward()
            opt.step()
            status.step(f"(eps_high {eh:g})")
        with torch.no_grad():
            new_logp, _ = token_logp(response_logits(m, prompts, roll.responses), roll.responses,
                                     cfg.temperature)
        out[eh] = {"n": int(sel.sum()), "p_old": float(old_logp.exp()[sel].mean()),
                   "p_new": float(new_logp.exp()[sel].mean()), "high_frac": stats["clip/high_frac"]}
    return out


def zero_signal_share(cfg: RunConfig, *, temperatures=(0.7, 1.0, 1.3), group_sizes=(4, 8, 16),
                      n_prompts: int = 128, per_prompt: int = 32, seed: int = 0,
                      progress: bool = True) -> list:
    """Share of zero-signal groups from the warm-start policy, measured and predicted.

    For each temperature, ``per_prompt`` responses per prompt give each prompt's pass rate p_i;
    they are cut into groups of G to measure the share of all-equal groups, and compared with
    the prediction mean_i(p_i^G + (1-p_i)^G) and with the one-rate prediction
    1 - advantages.signal_probability(mean p, G), which ignores that prompts differ.
    Returns rows {"T", "G", "mean_p", "measured", "measured_se", "predicted", "one_rate"}; measured_se is
    the binomial standard error of the measured share over its n_prompts * per_prompt / G groups.
    """
    import torch

    from .. import advantages
    from .policy import sample
    from .task import AdditionTask
    _addition_only(cfg, "zero_signal_share")
    status = Status("sampling at each temperature", len(temperatures), progress)
    model, device = _warm_policy(cfg)
    pick = torch.Generator().manual_seed(seed)
    train_prompts = AdditionTask(heldout_questions=cfg.heldout_questions).prompts("train")
    prompts = train_prompts[torch.randint(len(train_prompts), (n_prompts,), generator=pick)]
    prompts = prompts.repeat_interleave(per_prompt, dim=0).to(device)                   # [N * K, Lp]
    rows = []
    for temp in temperatures:
        g = torch.Generator(device=device).manual_seed(seed)
        roll = sample(model, prompts, cfg.max_new_tokens, temperature=temp, generator=g)
        r = AdditionTask.reward(prompts, roll.responses).view(n_prompts, per_prompt)    # [N, K]
        p = r.mean(dim=1).double()                                                      # [N]
        for G in group_sizes:
            if per_prompt % G:
                raise ValueError(f"group size {G} must divide per_prompt={per_prompt}")
            measured = 1 - advantages.signal_groups(r.reshape(-1), G).double().mean()
            predicted = (p ** G + (1 - p) ** G).mean()
            one_rate = 1 - advantages.signal_probability(float(p.mean()), G)
            n_groups = n_prompts * per_prompt // G
            rows.append({"T": temp, "G": G, "mean_p": float(p.mean()), "measured": float(measured),
                         "measured_se": float((measured * (1 - measured) / n_groups) ** 0.5),
                         "predicted": float(predicted), "one_rate": float(one_rate)})
        status.step(f"(T {temp:g})")
    return rows


def zero_signal_rise(rows: list[dict], G: int, *, low: float = 0.7, high: float = 1.3) -> float:
    """How many standard errors the measured zero-signal share rises from T = ``low`` to T = ``high`` at
    group size ``G`` (``rows``: ``zero_signal_share``'s)."""
    by = {(r["T"], r["G"]): r for r in rows}
    a, b = by[low, G], by[high, G]
    return (b["measured"] - a["measured"]) / math.hypot(b["measured_se"], a["measured_se"])


def precomputed(name: str, data_dir="data") -> dict:
    """Load ``<data_dir>/toy_<name>.json`` and print the label every precomputed figure carries:
    when it was made, seeds x steps, and the command that regenerates it."""
    import os
    meta, runs = load_results(os.path.join(data_dir, f"toy_{name}.json"))
    print(f"PRECOMPUTED ({meta['finished']}): {len(meta['seeds'])} seeds x {meta['steps']} steps\n"
          f"regenerate with: python benchmarks/toy_results.py --only {name}")
    return runs


def error_analysis(cfg: RunConfig, state: dict, *, samples: int | None = None, seed: int = 0) -> dict:
    """Where a trained policy still fails on the held-out prompts, and whether RL can still see it.

    Returns {"by_kind": {kind: (greedy accuracy, n)} for the carry classes of ``task.carry_class``,
    "units_ten": (greedy accuracy, n) on the prompts whose units digits sum to exactly 10 (the
    answer ends in 0 because of a carry: the class the width-64 CPU runs that plateau near 0.88 all miss),
    "wrong": number of prompts greedy decoding gets wrong, "stuck": the share of those whose
    ``samples`` responses (default: the config's group size) at the training temperature are all
    wrong, i.e. a group of that size would carry no signal and GRPO could not fix them}.
    """
    import torch

    from .policy import sample
    from .task import AdditionTask, carry_class, decode_operands
    from ..rl.model import build_model
    _addition_only(cfg, "error_analysis")
    device = cfg.resolved_device()
    model = build_model(cfg).to(device)
    model.load_state_dict(state)
    prompts = AdditionTask(heldout_questions=cfg.heldout_questions).prompts("heldout").to(device)
    ok = AdditionTask.reward(prompts, sample(model, prompts, cfg.max_new_tokens, greedy=True).responses)
    kinds = carry_class(prompts)
    by_kind = {}
    for kind in ("no carry", "units carry", "tens carry", "both carry"):
        idx = [i for i, k in enumerate(kinds) if k == kind]
        if idx:
            by_kind[kind] = (float(ok[idx].mean()), len(idx))
    a, b = decode_operands(prompts)
    ten = (a % 10 + b % 10) == 10                      # the answer ends in 0 because of a carry
    units_ten = (float(ok[ten].mean()) if ten.any() else float("nan"), int(ten.sum()))
    wrong = prompts[ok == 0]
    stuck = float("nan")
    if len(wrong):
        g = torch.Generator(device=device).manual_seed(seed)
        samples = samples or cfg.group_size
        rep = wrong.repeat_interleave(samples, dim=0)
        roll = sample(model, rep, cfg.max_new_tokens, temperature=cfg.temperature, generator=g)
        r = AdditionTask.reward(rep, roll.responses).view(len(wrong), samples)
        stuck = float((r.sum(dim=1) == 0).float().mean())
    return {"by_kind": by_kind, "units_ten": units_ten, "wrong": int(len(wrong)), "stuck": stuck}
