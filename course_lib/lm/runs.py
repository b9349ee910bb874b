"""The stored GRPO runs on the real model (``benchmarks/real_lm_grpo.py``, chapter 13): their curves, the
held-out measurements before and after training, and the comparisons the chapter's verdicts rest on.

A record holds ``runs`` keyed "arm/seed" (each: the trainer's rows, the config, times, peak memory, the held-out
measurement ``after``) and the pretrained model's greedy replies; the model before training was measured by
``benchmarks/real_lm_task.py`` with the same function (``real_lm_task.json``, one entry per sampling seed).
"""
from __future__ import annotations

import math
from statistics import mean

# the held-out quantities measured before and after: sampled (8 replies per question) and greedy
HELDOUT = {"pass@1": ("sampled", "pass@1"), "pass@8": ("sampled", "pass@8"), "format": ("sampled", "format"),
           "truncated": ("sampled", "truncated"), "mean length": ("sampled", "mean_length"),
           "greedy accuracy": ("greedy", "pass@1")}


def by_arm(record: dict) -> dict[str, dict[int, dict]]:
    """{arm: {seed: run}} of a ``real_lm_grpo.json`` record, seeds in order."""
    out: dict[str, dict[int, dict]] = {}
    for key, run in sorted(record["runs"].items(), key=lambda kv: (kv[0].split("/")[0], int(kv[0].split("/")[1]))):
        arm, seed = key.split("/")
        out.setdefault(arm, {})[int(seed)] = run
    return out


def series(run: dict, key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of a metric over a run's RL steps (the rows that have it: every step, or evaluations)."""
    rows = [r for r in run["rows"] if key in r and (r["step"] > 0 or key == "acc/heldout")]
    return [r["step"] for r in rows], [float(r[key]) for r in rows]


def format_rate(run: dict) -> tuple[list[int], list[float]]:
    """The share of each step's samples that state "Answer: <n>": the reward is the exact verdict plus
    ``format_weight`` times the format verdict, so (reward/mean - acc/sampled) / format_weight, exactly."""
    w = run["config"]["format_weight"]
    rows = [r for r in run["rows"] if r["step"] > 0]
    return [r["step"] for r in rows], [(r["reward/mean"] - r["acc/sampled"]) / w for r in rows]


def window_mean(values: list[float], first: int, last: int, steps: list[int]) -> float:
    """Mean of the values at steps first..last (inclusive)."""
    chosen = [v for s, v in zip(steps, values) if first <= s <= last]
    if not chosen:
        raise ValueError(f"no step in {first}..{last}")
    return mean(chosen)


def early_late(run: dict, key: str, width: int = 10) -> tuple[float, float]:
    """A metric's mean over the first and over the last ``width`` RL steps of a run."""
    steps, values = format_rate(run) if key == "format" else series(run, key)
    return window_mean(values, 1, width, steps), window_mean(values, steps[-1] - width + 1, steps[-1], steps)


def before(task_record: dict, name: str) -> list[float]:
    """A held-out quantity of the pretrained model, one value per sampling seed (greedy: one value)."""
    kind, key = HELDOUT[name]
    if kind == "greedy":
        return [task_record["greedy"][key]]
    return [task_record["seeds"][s][key] for s in sorted(task_record["seeds"], key=int)]


def after(runs: dict[int, dict], name: str) -> list[float]:
    """A held-out quantity after training, one value per training seed of an arm."""
    kind, key = HELDOUT[name]
    return [runs[s]["after"][kind][key] for s in sorted(runs)]


def separated(a: list[float], b: list[float]) -> int:
    """+1 when every value of b lies above every value of a, -1 when every one lies below, else 0 (the
    ranges overlap: no difference beyond the spread between seeds)."""
    if min(b) > max(a):
        return 1
    if max(b) < min(a):
        return -1
    return 0


def spread(values: list[float]) -> str:
    """"0.244 (0.244-0.252)": the mean and the range of a few seeds' values."""
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def run_costs(run: dict) -> dict:
    """A run's measured cost: minutes of training, mean seconds per step and their split, tokens per second,
    peak memory."""
    rows = [r for r in run["rows"] if r["step"] > 0]
    parts = {k: mean(r[f"time/{k}_s"] for r in rows) for k in ("sample", "targets", "learn", "step")}
    return {"train_min": run["train_seconds"] / 60, "steps": len(rows), **{f"{k}_s": v for k, v in parts.items()},
            "sample_tok_s": run["sample_tok_s"], "learn_tok_s": run["learn_tok_s"],
            "peak_gb": run["peak_rss_gb"]}


def trainers_side_by_side(trl_record: dict) -> list[list]:
    """``benchmarks/trl_real.py``'s record as rows (part, course seconds, TRL seconds): the median of each part
    of a step over the timed steps, in the parts both clocks separate (TRL's loss forward, backward and
    optimiser are one learning part here, as the course's are), then the median step. The parts' medians
    need not add up to the median step."""
    c = trl_record["runs"]["course"]["summary"]
    t = trl_record["runs"]["TRL"]["summary"]
    cp, tp = c["median_phase_s"], t["median_phase_s"]
    return [["sampling", cp["sample"], tp["sample"]],
            ["between sampling and the loss", cp["targets"], tp["score"]],
            ["learning: loss forward, backward, optimiser", cp["learn"], tp["loss forward"] + tp["backward + optimiser"]],
            ["the rest", cp["other"], tp["other"]],
            ["step (median)", c["median_step_s"], t["median_step_s"]]]


def learning_split(step_record: dict) -> list[list]:
    """``benchmarks/real_lm_step.py``'s record as rows (part, median seconds, share of the median step)."""
    step = step_record["median_step_s"]
    return [[part, s, s / step] for part, s in step_record["median_s"].items()] + [["step (median)", step, 1.0]]


def differing_first_rows(live_rows: list[dict], stored_rows: list[dict], keys: tuple[str, ...],
                         rel: float = 1e-4) -> list[str]:
    """The keys on which a live run's first rows differ from the stored run's (relative ``rel``; empty: they
    agree). Used where both ran on the same float path."""
    bad = []
    for live, stored in zip(live_rows, stored_rows):
        for k in keys:
            if k in stored and not math.isclose(live[k], stored[k], rel_tol=rel, abs_tol=1e-9):
                bad.append(f"step {stored['step']} {k}: {live[k]:.6g} live vs {stored[k]:.6g} stored")
    return bad


def same_float_path(env: dict) -> bool:
    """Whether a run recorded in ``env`` (``benchmarks/real_lm_task.environment``) took this machine's float path:
    the same processor (its name and ``cpu_identity``: vendor, family, model, stepping, instruction-set flags),
    PyTorch CPU capability, float-path variables, torch and transformers. Only then does a live run repeat its
    numbers; elsewhere a sampled token can flip and the replies part. A record without the processor's identity,
    or a machine that cannot read its own, is never on this machine's path."""
    return bool(env.get("cpu_id")) and all(env.get(k) == v for k, v in float_path().items())


def float_path() -> dict:
    """This machine's float path as ``benchmarks/real_lm_task.environment`` records it."""
    import torch
    import transformers

    from ..rl.history import cpu_identity, cpu_model, float_path_variables
    return {"cpu": cpu_model(), "cpu_id": cpu_identity(), "capability": torch.backends.cpu.get_cpu_capability(),
            "float_path_variables": float_path_variables(),
            "torch": torch.__version__, "transformers": transformers.__version__}


def step_range(runs: dict[int, dict], key: str, first: int, last: int) -> tuple[float, float]:
    """The smallest and largest value of a metric over every seed's steps first..last."""
    values = [v for run in runs.values() for s, v in zip(*series(run, key)) if first <= s <= last]
    return min(values), max(values)


def live_agrees(live: list[dict], runs: dict[int, dict], keys: tuple[str, ...], *, same_path: bool,
                first_steps: int = 10) -> bool:
    """Whether a live run of seed 0's first steps (``live``, step 0 first) agrees with the stored ``runs``: on the
    stored run's float path (``same_path``) every metric in ``keys`` repeats seed 0's to 1e-4; on any other, a
    sampled token can flip, so each live step's mean reward need only lie within the stored seeds' first
    ``first_steps`` steps."""
    if same_path:
        return not differing_first_rows(live, runs[0]["rows"][:len(live)], keys)
    lo, hi = step_range(runs, "reward/mean", 1, first_steps)
    return all(lo <= r["reward/mean"] <= hi for r in live[1:])


def half_way_step(run: dict, key: str, width: int = 5) -> int:
    """The first RL step at which a metric's trailing ``width``-step mean has covered half of its change, from
    its mean over the first ``width`` steps to its mean over the last ``width`` (which of two rises came first)."""
    steps, values = format_rate(run) if key == "format" else series(run, key)
    smooth = [mean(values[max(0, i - width + 1): i + 1]) for i in range(len(values))]
    start, end = mean(values[:width]), mean(values[-width:])
    half = (start + end) / 2
    for s, v in zip(steps, smooth):
        if (v - half) * (end - start) >= 0 and s > width:
            return s
    return steps[-1]


def never_solved(task_record: dict) -> list[int]:
    """The held-out questions no sample of the pretrained model answered: 0 right in every sampling seed (24
    replies at 8 per seed), by index in the held-out order."""
    per_seed = [task_record["seeds"][s]["correct_per_group"] for s in task_record["seeds"]]
    return [q for q in range(len(per_seed[0])) if all(counts[q] == 0 for counts in per_seed)]


def solved_share(run: dict, questions: list[int]) -> tuple[float, float]:
    """On the given held-out questions after training: the share of replies that are right (pass@1) and the share
    of questions with at least one right reply among 8 (pass@8)."""
    counts = run["after"]["sampled"]["correct_per_group"]
    G = run["after"]["sampled"]["replies"] // len(counts)
    chosen = [counts[q] for q in questions]
    return sum(chosen) / (G * len(chosen)), sum(c > 0 for c in chosen) / len(chosen)
