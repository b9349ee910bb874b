"""Presentation for chapter 07: curves of Histories and summaries of result files.

Takes Histories (from ``train`` or ``load_histories``) and returns matplotlib Figures or text;
no algorithm code imports this module.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..metrics import METRICS


def _runs(runs) -> dict:
    """{label: History or [History, ...]} -> {label: [History, ...]}."""
    return {k: (v if isinstance(v, list) else [v]) for k, v in runs.items()}


def smooth(ys: list, window: int) -> list:
    """Trailing moving average (window 1: unchanged)."""
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot_runs(runs: dict, keys: list, *, x: str = "step", window: int = 1, title: str | None = None,
              figsize=(11, 3.2), dpi: int = 72):
    """One panel per metric key; one colour per label, one line per seed (solid, dashed, dotted).

    x="step" or "samples/drawn" (responses sampled so far). Returns the (closed) Figure: make it
    a cell's last expression to show it.
    """
    fig, axes = plt.subplots(1, len(keys), figsize=figsize, squeeze=False, dpi=dpi)
    styles = ["-", "--", ":", "-."]
    for ax, key in zip(axes[0], keys):
        for ci, (label, hists) in enumerate(_runs(runs).items()):
            for si, h in enumerate(hists):
                steps, ys = h.series(key)
                if x == "step":
                    xs = steps
                else:
                    lookup = {r["step"]: r.get(x) for r in h.rows}
                    xs = [lookup[s] for s in steps]
                w = 1 if key == "acc/heldout" else window
                ax.plot(xs, smooth(ys, w), styles[si % 4], color=f"C{ci}", lw=1.3,
                        label=label if si == 0 else None)
        ax.set_title(key, fontsize=10)
        ax.set_xlabel("responses sampled" if x == "samples/drawn" else "RL step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    plt.close(fig)          # shown once, as the cell's value, not again by the inline backend
    return fig


def window_mean(h, key: str, *, last: int | None = None, first: int | None = None) -> float:
    """Mean of ``key`` over the last (or first) so many *steps* of a run, not logged rows: stored
    runs log every 2nd step, and "the last 20 steps" should mean the same for them as for a live run."""
    if (last is None) == (first is None):
        raise ValueError("give exactly one of last= and first=")
    steps, ys = h.series(key)
    if not steps:
        return float("nan")
    if last is not None:
        keep = [y for s, y in zip(steps, ys) if s > steps[-1] - last]
    else:
        keep = [y for s, y in zip(steps, ys) if s < steps[0] + first]
    return sum(keep) / len(keep)


def final_table(runs: dict, keys: list, *, last_n: int = 20) -> str:
    """Text table: per label and seed, the last held-out accuracy and the mean of other keys over
    the last ``last_n`` steps."""
    lines = []
    header = f"{'run':<26}" + "".join(f"{k:>24}" for k in keys)
    lines.append(header)
    for label, hists in _runs(runs).items():
        per_key = []
        for k in keys:
            per_key.append(per_seed([h.last(k) if k == "acc/heldout" else window_mean(h, k, last=last_n)
                                     for h in hists]))
        lines.append(f"{label:<26}" + "".join(f"{c:>24}" for c in per_key))
    return "\n".join(lines)


def per_seed(values, fmt: str = ".3f") -> str:
    """One number per seed as the tables and verdicts print them: "0.748 / 0.676 / 0.754"."""
    return " / ".join("nan" if math.isnan(v) else format(v, fmt) for v in values)


def seed_values(runs: dict, key: str, *, last_n: int = 20) -> dict:
    """{label: [value per seed]}: last held-out accuracy, or the mean of the last ``last_n`` steps."""
    return {label: [h.last(key) if key == "acc/heldout" else window_mean(h, key, last=last_n) for h in hists]
            for label, hists in _runs(runs).items()}


def describe(keys) -> str:
    """'key: definition' lines for the given metric keys (from the glossary)."""
    return "\n".join(f"{k}: {METRICS[k]}" for k in keys)


def source_excerpt(fn, start: str, end: str | None = None) -> str:
    """The lines of ``fn``'s source from the first line containing ``start`` up to (not
    including) the first later line containing ``end``: show library code, never retype it."""
    import inspect
    lines = inspect.getsource(fn).splitlines()
    i = next(k for k, line in enumerate(lines) if start in line)
    j = next((k for k in range(i + 1, len(lines)) if end and end in lines[k]), len(lines))
    return "\n".join(lines[i:j])


def value_at(h, key: str, x_key: str, x: float) -> float:
    """The last logged value of ``key`` at a row whose ``x_key`` is <= x (e.g. accuracy after a
    budget of responses sampled). NaN when there is none."""
    best = float("nan")
    for r in h.rows:
        v = r.get(key)
        if r.get(x_key, float("inf")) <= x and v is not None and v == v:
            best = v
    return best
