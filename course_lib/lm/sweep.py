"""A learning-rate sweep on the real model, LoRA against full fine-tuning (``benchmarks/real_lm_lora.py``'s record
beside chapter 13's full fine-tuning runs): the runs grouped by setting and learning rate, each setting's best
learning rate, the band of learning rates as good as it, and the ratio of two settings' best learning rates.

A learning rate is as good as the best when the gap between their means is within the larger of their seed ranges
(chapter 07's rule). A sweep measures a grid, so the best learning rate is known only to lie between the grid's
neighbours of that band (an optimum at the grid's edge may lie beyond it: no bound on that side).
"""
from __future__ import annotations

from statistics import mean

# what may differ between the runs of one sweep: the learning rate, the seed, and the policy with its LoRA fields
VARIED = ("lr", "seed", "policy", "lora_rank", "lora_alpha", "lora_targets")


def setting(config: dict) -> str:
    """A run's setting by its config record: ``"full"`` (full fine-tuning) or ``"rank R"`` (LoRA)."""
    return f"rank {config['lora_rank']}" if config.get("policy") == "smollm2_lora" else "full"


def heldout_pass1(run: dict) -> float:
    """A run's held-out pass@1 after training (the sweep's default measure)."""
    return run["after"]["sampled"]["pass@1"]


def sweep(named_runs: dict[str, dict], measure=heldout_pass1) -> dict[str, dict[float, dict[int, float]]]:
    """{setting: {lr: {seed: measure(run)}}}, settings and learning rates in order. Every run must share one
    config outside ``VARIED``: a run that differs elsewhere (another loss, another task) is an error naming the
    run and the field."""
    if not named_runs:
        raise ValueError("named_runs is empty: pass {name: run} of at least one stored run")
    (first_name, first), *_ = named_runs.items()
    base = {k: v for k, v in first["config"].items() if k not in VARIED}
    out: dict[str, dict[float, dict[int, float]]] = {}
    for name, run in named_runs.items():
        cfg = run["config"]
        for key in sorted(set(base) | set(cfg) - set(VARIED)):
            if cfg.get(key) != base.get(key):
                raise ValueError(f"run {name!r} differs from {first_name!r} in {key!r} ({cfg.get(key)!r} against "
                                 f"{base.get(key)!r}); a sweep varies only {', '.join(VARIED)}")
        by_lr = out.setdefault(setting(cfg), {}).setdefault(float(cfg["lr"]), {})
        if cfg["seed"] in by_lr:
            raise ValueError(f"run {name!r} repeats {setting(cfg)}, lr {cfg['lr']:g}, seed {cfg['seed']}")
        by_lr[cfg["seed"]] = measure(run)
    return {s: {lr: dict(sorted(v.items())) for lr, v in sorted(by.items())}
            for s, by in sorted(out.items(), key=lambda kv: (kv[0] != "full", kv[0]))}


def _check(points: dict[float, dict[int, float]]) -> list[float]:
    if not points or any(not v for v in points.values()):
        raise ValueError("points must map each learning rate to {seed: value} with at least one seed")
    return sorted(points)


def best_lr(points: dict[float, dict[int, float]]) -> float:
    """The learning rate with the highest mean over its seeds. On a tie, the better-measured point (more seeds),
    then the lower rate. Ties are real here: held-out pass@1 counts right answers out of a fixed number of samples,
    so one run can answer exactly as many as three seeds' mean (``statistics.mean`` rounds the exact mean once)."""
    lrs = _check(points)
    return max(lrs, key=lambda lr: (mean(points[lr].values()), len(points[lr]), -lr))


def ties(points: dict[float, dict[int, float]]) -> list[float]:
    """The other learning rates whose mean equals the best one's exactly: the ties ``best_lr`` broke."""
    best = best_lr(points)
    return [lr for lr in _check(points) if lr != best and mean(points[lr].values()) == mean(points[best].values())]


def runs_at(named_runs: dict[str, dict], setting_name: str, lr: float) -> dict[int, dict]:
    """{seed: run} of one point of a sweep: the runs of that setting (``setting``) at that learning rate."""
    return {run["config"]["seed"]: run for run in named_runs.values()
            if setting(run["config"]) == setting_name and run["config"]["lr"] == lr}


def seeded_lr(points: dict[float, dict[int, float]]) -> float:
    """The learning rate with the most seeds: where a sweep added seeds after its first pass (the best of that pass,
    which its added seeds may since have moved off the top); on a tie, the best mean."""
    lrs = _check(points)
    return max(lrs, key=lambda lr: (len(points[lr]), mean(points[lr].values()), -lr))


def as_good(points: dict[float, dict[int, float]], lr: float) -> bool:
    """Whether ``lr``'s runs are as good as the best learning rate's: the gap between their means is
    within the larger of their seed ranges."""
    best = best_lr(points)
    a, b = list(points[lr].values()), list(points[best].values())
    return mean(b) - mean(a) <= max(max(a) - min(a), max(b) - min(b))


def good_band(points: dict[float, dict[int, float]]) -> tuple[float, float]:
    """(lowest, highest) learning rate of the unbroken run of grid points around the best that are as good as it."""
    lrs = _check(points)
    i = j = lrs.index(best_lr(points))
    while i > 0 and as_good(points, lrs[i - 1]):
        i -= 1
    while j < len(lrs) - 1 and as_good(points, lrs[j + 1]):
        j += 1
    return lrs[i], lrs[j]


def best_lr_bounds(points: dict[float, dict[int, float]]) -> tuple[float | None, float | None]:
    """Where the best learning rate can lie: between the grid's neighbours of the good band (None where the band
    reaches the grid's edge: the sweep does not bound it on that side)."""
    lrs = _check(points)
    lo, hi = good_band(points)
    i, j = lrs.index(lo), lrs.index(hi)
    return (lrs[i - 1] if i > 0 else None), (lrs[j + 1] if j < len(lrs) - 1 else None)


def lr_ratio(points: dict[float, dict[int, float]], reference: dict[float, dict[int, float]]) -> dict:
    """The ratio of two settings' best learning rates (``points``' over ``reference``'s) and the range the two
    sweeps allow it: {"ratio", "lowest", "highest"} (None where a sweep leaves that side open)."""
    a_lo, a_hi = best_lr_bounds(points)
    b_lo, b_hi = best_lr_bounds(reference)
    return {"ratio": best_lr(points) / best_lr(reference),
            "lowest": a_lo / b_hi if a_lo is not None and b_hi is not None else None,
            "highest": a_hi / b_lo if a_hi is not None and b_lo is not None else None}


def range_text(lowest: float | None, highest: float | None, fmt: str = ".1f") -> str:
    """A range whose open sides are None, in words: "between a and b", "above a", "below b" or "unbounded"."""
    if lowest is not None and highest is not None:
        return f"between {lowest:{fmt}} and {highest:{fmt}}"
    if lowest is not None:
        return f"above {lowest:{fmt}}"
    return "unbounded" if highest is None else f"below {highest:{fmt}}"
