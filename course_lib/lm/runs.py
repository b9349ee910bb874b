"""The stored GRPO runs on the real model (``benchmarks/real_lm_grpo.py``, chapter 13): their curves, the
held-out measurements before and after training, and the comparisons the chapter's verdicts rest on.

A record holds ``runs`` keyed "arm/seed" (each: the trainer's rows, the config, times, peak memory, the held-out
measurement ``after``); the model before training was measured by ``benchmarks/real_lm_task.py`` with the same
function (``real_lm_task.json``). A held-out measurement (``real_lm_task.summary``) keeps every reply's text,
finished flag and length, G replies per question in the task's held-out order, so the reply categories, pass@k
and per-pair results below are all read from the replies themselves.
"""
from __future__ import annotations

import math
from statistics import mean, stdev

from .task import CATEGORIES, ChatAdditionTask, categories, last_integer

# the held-out quantities measured before and after: name -> (which measurement, how it is read from it)
HELDOUT = {"pass@1": ("sampled", lambda m: m["pass@1"]),
           "finished": ("sampled", lambda m: m["categories"]["finished"]),
           "format": ("sampled", lambda m: m["categories"]["formatted"]),
           "right sum anywhere": ("sampled", lambda m: m["categories"]["right_sum"]),
           "no sum": ("sampled", lambda m: m["categories"]["no_sum"]),
           "exact if finished": ("sampled", lambda m: accuracy_if_finished(m)),
           "mean length": ("sampled", lambda m: m["mean_length"]),
           "greedy accuracy": ("greedy", lambda m: m["pass@1"])}


def by_arm(record: dict) -> dict[str, dict[int, dict]]:
    """{arm: {seed: run}} of a ``real_lm_grpo.json`` record, seeds in order."""
    out: dict[str, dict[int, dict]] = {}
    for key, run in sorted(record["runs"].items(), key=lambda kv: (kv[0].split("/")[0], int(kv[0].split("/")[1]))):
        arm, seed = key.split("/")
        out.setdefault(arm, {})[int(seed)] = run
    return out


def series(run: dict, key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of a metric over a run's RL steps (the rows that have it: every step, or evaluations;
    a step where it is undefined, NaN, as the length of the wrong replies when every reply was right, is left
    out)."""
    rows = [r for r in run["rows"] if key in r and (r["step"] > 0 or key == "acc/heldout")
            and not math.isnan(float(r[key]))]
    return [r["step"] for r in rows], [float(r[key]) for r in rows]


def window_mean(values: list[float], first: int, last: int, steps: list[int]) -> float:
    """Mean of the values at steps first..last (inclusive)."""
    chosen = [v for s, v in zip(steps, values) if first <= s <= last]
    if not chosen:
        raise ValueError(f"no step in {first}..{last}")
    return mean(chosen)


def late_mean(steps: list[int], values: list[float], width: int = 10) -> float:
    """Mean of the values over the last ``width`` steps of a curve."""
    return window_mean(values, steps[-1] - width + 1, steps[-1], steps)


def trailing_mean(values: list[float], width: int = 5) -> list[float]:
    """The ``width``-step trailing moving average of a curve (the first points average what there is)."""
    return [mean(values[max(0, i - width + 1): i + 1]) for i in range(len(values))]


def early_late(run: dict, key: str, width: int = 10) -> tuple[float, float]:
    """A metric's mean over the first and over the last ``width`` RL steps of a run."""
    steps, values = series(run, key)
    return window_mean(values, 1, width, steps), late_mean(steps, values, width)


def before(task_record: dict, name: str) -> float:
    """A held-out quantity of the pretrained model (``HELDOUT``; sampled: sampling seed 0's replies)."""
    kind, read = HELDOUT[name]
    return read(task_record["greedy"] if kind == "greedy" else task_record["seeds"]["0"])


def after(runs: dict[int, dict], name: str) -> list[float]:
    """A held-out quantity after training (``HELDOUT``), one value per training seed of an arm."""
    kind, read = HELDOUT[name]
    return [read(runs[s]["after"][kind]) for s in sorted(runs)]


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


def step_times(trl_record: dict) -> dict:
    """``benchmarks/trl_real.py``'s interleaved timing, summed up: per trainer (median step, shortest, longest,
    timed steps), the ratio of the medians TRL / course, the range of the ratio over steps run back to back
    (a course step, then TRL's), whether the two trainers' ranges of step times overlap, and the range of the
    load average at the hand-overs."""
    out = {}
    for name in ("course", "TRL"):
        s = trl_record["runs"][name]["summary"]
        out[name] = (s["median_step_s"], *s["step_s_range"], s["timed_steps"])
    pairs, loads = trl_record["pair_ratios"], [x for _, x in trl_record["load_at_hand_over"]]
    return {**out, "ratio": out["TRL"][0] / out["course"][0], "pair_ratios": (min(pairs), max(pairs), len(pairs)),
            "overlap": out["TRL"][1] <= out["course"][2] and out["course"][1] <= out["TRL"][2],
            "load": (min(loads), max(loads))}


# benchmarks/real_lm_step.py's parts of a step, as a reader reads them
STEP_PARTS = {"sample": "sampling", "targets": "advantages; pi_old read from the loss forward",
              "loss forward": "loss forwards (with gradient)", "backward": "backward", "optimizer": "AdamW step",
              "other": "the rest"}


def learning_split(step_record: dict) -> list[list]:
    """``benchmarks/real_lm_step.py``'s record as rows (part, median seconds, share of the median step), each
    part named as ``STEP_PARTS`` reads it."""
    step = step_record["median_step_s"]
    return ([[STEP_PARTS.get(part, part), s, s / step] for part, s in step_record["median_s"].items()]
            + [["step (median)", step, 1.0]])


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


def half_way_step(run: dict, key: str, width: int = 5, min_change: float = 0.1) -> int | None:
    """The first RL step at which a metric's trailing ``width``-step mean has covered half of its change, from
    its mean over the first ``width`` steps to its mean over the last ``width`` (which of two rises came first);
    None when the metric changed by less than ``min_change`` (a share that never moved has no half-way step)."""
    steps, values = series(run, key)
    smooth = [mean(values[max(0, i - width + 1): i + 1]) for i in range(len(values))]
    start, end = mean(values[:width]), mean(values[-width:])
    if abs(end - start) < min_change:
        return None
    half = (start + end) / 2
    for s, v in zip(steps, smooth):
        if (v - half) * (end - start) >= 0 and s > width:
            return s
    return steps[-1]


# ----------------------------------------------------------------------------------------------
# a held-out measurement, reply by reply (``real_lm_task.summary``'s record)
# ----------------------------------------------------------------------------------------------
def reply_answers(measure: dict, task: ChatAdditionTask | None = None) -> list[int]:
    """The right answer of each stored reply: G replies per held-out question, in the task's order."""
    q = (task or ChatAdditionTask()).questions("heldout")
    G = group_size(measure)
    return [a for a in q.answers for _ in range(G)]


def group_size(measure: dict) -> int:
    """Replies per question of a held-out measurement."""
    return measure["replies"] // len(measure["correct_per_group"])


def reply_categories(measure: dict, task: ChatAdditionTask | None = None) -> list[dict[str, float]]:
    """``lm.task.categories`` of every stored reply, recomputed from its text and finished flag."""
    return [categories(t, a, bool(f)) for t, a, f in
            zip(measure["texts"], reply_answers(measure, task), measure["finished"])]


def category_shares(measure: dict) -> dict[str, float]:
    """The share of the replies in each category, recomputed from the texts."""
    cats = reply_categories(measure)
    return {c: mean(x[c] for x in cats) for c in CATEGORIES}


def accuracy_if_finished(measure: dict) -> float:
    """The exact share among the replies that finished within the budget: what pass@1 would be if every reply
    finished and nothing else changed (stopping alone)."""
    done = [e for e, f in zip((x["exact"] for x in reply_categories(measure)), measure["finished"]) if f]
    return mean(done) if done else float("nan")


ANSWER_KINDS = ("exact", "right sum, not last", "wrong sum only", "no sum")


def answer_kind(cat: dict[str, float]) -> str:
    """Which of ``ANSWER_KINDS`` a reply's categories put it in (the exact verdict first)."""
    if cat["exact"]:
        return "exact"
    if cat["right_sum"]:
        return "right sum, not last"
    return "no sum" if cat["no_sum"] else "wrong sum only"


def format_answer_table(measure: dict) -> dict[tuple[bool, str], list[int]]:
    """CS336 A5's format x answer table: (formatted, answer kind) -> the indices of the replies in that cell."""
    out: dict[tuple[bool, str], list[int]] = {(f, k): [] for f in (True, False) for k in ANSWER_KINDS}
    for i, cat in enumerate(reply_categories(measure)):
        out[(bool(cat["formatted"]), answer_kind(cat))].append(i)
    return out


def format_answer_shares(measure: dict) -> dict[tuple[bool, str], float]:
    """``format_answer_table`` as shares of the replies."""
    return {k: len(v) / measure["replies"] for k, v in format_answer_table(measure).items()}


def operand_answer_share(measure: dict, task: ChatAdditionTask | None = None) -> float:
    """The share of the replies whose answer (the last integer they state, which the exact verifier reads) is
    one of the question's two numbers and not its sum: "What is 0 + 5?" -> "Answer: 0"."""
    pairs = (task or ChatAdditionTask()).unordered_of("heldout")
    G = group_size(measure)
    echo = [last_integer(t) in p and last_integer(t) != sum(p)
            for t, p in zip(measure["texts"], (p for p in pairs for _ in range(G)))]
    return mean(echo)


def pair_accuracy(measure: dict, task: ChatAdditionTask | None = None) -> dict[tuple[int, int], float]:
    """The exact share of each held-out unordered pair {a, b}: all its replies, both orders, every wording."""
    units = (task or ChatAdditionTask()).unordered_of("heldout")
    G = group_size(measure)
    right: dict[tuple[int, int], int] = {}
    asked: dict[tuple[int, int], int] = {}
    for unit, c in zip(units, measure["correct_per_group"]):
        right[unit] = right.get(unit, 0) + c
        asked[unit] = asked.get(unit, 0) + G
    return {u: right[u] / asked[u] for u in sorted(right)}


def mean_and_se(values: list[float]) -> tuple[float, float]:
    """The mean of per-unit values and its standard error over the units, stdev / sqrt(n)."""
    return mean(values), stdev(values) / math.sqrt(len(values))


def pass_at_k(measure: dict, ks) -> dict[int, float]:
    """The held-out pass@k curve (``course_lib.passk``'s unbiased estimator, averaged over questions) for each
    k in ``ks`` up to the replies per question."""
    from ..passk import pass_at_k as per_question
    G = group_size(measure)
    return {k: float(per_question(G, measure["correct_per_group"], k).mean()) for k in ks if k <= G}


def crossings(base: dict[int, float], trained: dict[int, float]) -> list[int]:
    """The k at which the pretrained model's pass@k is above the trained one's (both measured there)."""
    return [k for k in sorted(set(base) & set(trained)) if base[k] > trained[k]]


def gained_lost(before_counts: list[int], after_counts: list[int]) -> tuple[list[int], list[int]]:
    """The held-out questions (indices) a run gained: no right reply among the pretrained model's samples, some
    after; and lost: some right before, none among the trained model's."""
    gained = [i for i, (b, a) in enumerate(zip(before_counts, after_counts)) if b == 0 and a > 0]
    lost = [i for i, (b, a) in enumerate(zip(before_counts, after_counts)) if b > 0 and a == 0]
    return gained, lost


# the course's row keys and the names TRL logs the same quantity under (benchmarks/trl_real.trl_curve)
TRL_NAMES = {"reward/mean": "reward", "acc/sampled": "rewards/exact_reward/mean",
             "replies/formatted": "rewards/format_reward/mean", "len/all": "completions/mean_length",
             "len/truncated_frac": "completions/clipped_ratio", "entropy/mean": "entropy",
             "groups/zero_signal_frac": "frac_reward_zero_std", "grad/norm": "grad_norm"}


def trl_series(trl_record: dict, key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of a course metric (a key of ``TRL_NAMES``) in TRL's stored learning curve."""
    name = TRL_NAMES[key]
    rows = [r for r in trl_record["rows"] if name in r]
    return [r["step"] for r in rows], [r[name] for r in rows]


def trl_beside_course(trl_record: dict, runs: dict[int, dict], keys: tuple[str, ...],
                      width: int = 10) -> list[tuple[str, list[float], float, bool]]:
    """Per course metric (a key of ``TRL_NAMES``): the mean over the last ``width`` steps in each course seed,
    the same in TRL's stored curve, and whether TRL's lies within the seeds' range."""
    rows = []
    for key in keys:
        seeds = [early_late(run, key, width)[1] for run in runs.values()]
        trl = late_mean(*trl_series(trl_record, key), width)
        rows.append((key, seeds, trl, min(seeds) <= trl <= max(seeds)))
    return rows


def low_and_last(steps: list[int], values: list[float], width: int = 5) -> tuple[int, float, float]:
    """Where a curve's ``width``-step trailing mean was lowest (the step, the mean) and that mean at the last
    step: a reply length that fell and grew back shows a last mean well above its low."""
    means = trailing_mean(values, width)
    low = min(range(len(means)), key=means.__getitem__)
    return steps[low], means[low], means[-1]


def grad_clip_share(run: dict) -> float:
    """The share of a run's RL steps whose gradient norm exceeded ``grad_clip`` (the clip scaled them down)."""
    clip = run["config"]["grad_clip"]
    norms = series(run, "grad/norm")[1]
    return sum(n > clip for n in norms) / len(norms)
