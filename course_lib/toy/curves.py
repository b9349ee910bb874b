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


def _xy(h, key: str, x: str) -> tuple[list, list]:
    """The logged values of ``key`` against the step or another logged column (e.g. samples/drawn)."""
    steps, ys = h.series(key)
    if x == "step":
        return list(steps), list(ys)
    lookup = {r["step"]: r.get(x) for r in h.rows}
    return [lookup[s] for s in steps], list(ys)


def seed_mean(hists: list, key: str, x: str = "step") -> tuple[list, list]:
    """Mean over seeds of ``key`` (and of the x column) at the steps every seed logged."""
    series = [dict(zip(h.series(key)[0], zip(*_xy(h, key, x)))) for h in hists]
    common = sorted(set.intersection(*(set(s) for s in series))) if series else []
    xs = [sum(s[t][0] for s in series) / len(series) for t in common]
    ys = [sum(s[t][1] for s in series) / len(series) for t in common]
    return xs, ys


SEED_STYLES = ["--", ":", "-.", (0, (5, 1, 1, 1)), (0, (9, 3))]


def plot_runs(runs: dict, keys, *, x: str = "step", window: int = 1, title: str | None = None,
              ncols: int = 2, panel_size=(4.2, 2.9), dpi: int = 100, onset: int | None = None):
    """One panel per metric key (``ncols`` to a row), one colour per label: the mean over seeds as a
    thick solid line, each seed as a thin line in its own style; one legend, outside the panels,
    names the labels and the seeds' styles. The y label of a panel is the glossary's key.
    Sized to be shown at its own size: two panels and the legend below them are 840 px wide at the
    default panel_size, inside the notebook's column in JupyterLab at 1366 px with the file browser
    open (about 930 px), so its 10-point tick labels stay 14 px high.

    x="step" or "samples/drawn" (responses sampled so far; the mean line then averages x too).
    Non-accuracy keys are smoothed by a trailing mean over ``window`` logged rows; ``onset``: a
    thin grey vertical line at that step (where a change of configuration takes effect). Returns the
    (closed) Figure: make it a cell's last expression to show it.
    """
    from matplotlib.lines import Line2D
    keys = list(keys)
    runs = _runs(runs)
    ncols = min(ncols, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
                             squeeze=False, dpi=dpi)
    n_seeds = max(len(h) for h in runs.values())
    for i, key in enumerate(keys):
        ax = axes[i // ncols][i % ncols]
        w = 1 if key == "acc/heldout" else window
        for ci, (label, hists) in enumerate(runs.items()):
            if len(hists) == 1:                 # one run: a plain solid line
                xs, ys = _xy(hists[0], key, x)
                ax.plot(xs, smooth(ys, w), "-", color=f"C{ci}", lw=1.6)
                continue
            for si, h in enumerate(hists):
                xs, ys = _xy(h, key, x)
                ax.plot(xs, smooth(ys, w), linestyle=SEED_STYLES[si % len(SEED_STYLES)], color=f"C{ci}",
                        lw=1.2, alpha=0.8)
            if len(hists) > 1:
                xs, ys = seed_mean(hists, key, x)
                ax.plot(xs, smooth(ys, w), "-", color=f"C{ci}", lw=2.4)
        if onset is not None:
            ax.axvline(onset, color="0.45", lw=1.0, ls="-", alpha=0.7)
        ax.set_ylabel(key, fontsize=11)
        ax.set_xlabel("responses sampled" if x == "samples/drawn" else "RL step", fontsize=11)
        ax.tick_params(labelsize=10)
        ax.grid(alpha=0.3)
    for j in range(len(keys), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    handles = [Line2D([], [], color=f"C{ci}", lw=2.4 if n_seeds > 1 else 1.6, label=label)
               for ci, label in enumerate(runs)]
    if n_seeds > 1:
        handles.append(Line2D([], [], color="none", label=""))
        handles.append(Line2D([], [], color="black", lw=2.4, label=f"mean of {n_seeds} seeds"))
        seeds = [h.config.get("seed", s) for s, h in enumerate(max(runs.values(), key=len))]
        handles += [Line2D([], [], color="black", lw=1.2, linestyle=SEED_STYLES[s % len(SEED_STYLES)],
                           label=f"seed {seed}") for s, seed in enumerate(seeds)]
    if onset is not None:
        handles.append(Line2D([], [], color="0.45", lw=1.0, ls="-", alpha=0.7, label=f"onset (step {onset})"))
    if title:
        fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=10, frameon=False,
               ncol=min(len(handles), 4))                   # below the panels: adds height, not width
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


def final_table(runs: dict, keys, *, last_n: int = 20, width: int = 100) -> str:
    """Text table: per label, the final held-out accuracy and the mean of the other keys over the
    last ``last_n`` steps, one value per seed ("0.748 / 0.676 / 0.754").

    Columns are as wide as their widest header or cell, two spaces apart; keys that would make a
    line longer than ``width`` characters go into a further table below.
    """
    keys = list(keys)
    runs = _runs(runs)
    vals = {k: seed_values(runs, k, last_n=last_n) for k in keys}
    cells = {k: {label: per_seed(vals[k][label]) for label in runs} for k in keys}
    lab_w = max([len("run")] + [len(label) for label in runs])
    col_w = {k: max([len(k)] + [len(c) for c in cells[k].values()]) for k in keys}
    chunks, cur = [], []
    for k in keys:
        if cur and lab_w + sum(col_w[c] + 2 for c in cur + [k]) > width:
            chunks.append(cur)
            cur = []
        cur.append(k)
    chunks.append(cur)
    blocks = []
    for chunk in chunks:
        lines = ["run".ljust(lab_w) + "".join("  " + k.rjust(col_w[k]) for k in chunk)]
        lines += [label.ljust(lab_w) + "".join("  " + cells[k][label].rjust(col_w[k]) for k in chunk)
                  for label in runs]
        blocks.append("\n".join(line.rstrip() for line in lines))
    n = max(len(h) for h in runs.values())
    note = (f"({n} seed{'s' * (n > 1)}, one value each; acc/heldout: final evaluation; "
            f"other keys: mean of the last {last_n} steps)")
    return "\n\n".join(blocks) + "\n" + note


def per_seed(values, fmt: str = ".3f") -> str:
    """One number per seed as the tables and verdicts print them: "0.748 / 0.676 / 0.754"
    (None, a value that was not measured, prints as "-")."""
    return " / ".join("-" if v is None else "nan" if math.isnan(v) else format(v, fmt) for v in values)


def mean(xs) -> float:
    """The plain mean of a few numbers (one per seed or per arm)."""
    return sum(xs) / len(xs)


def values_from(h, key: str, step: int) -> list:
    """The logged values of ``key`` at steps >= ``step`` (a History or diagnosis.Curves)."""
    return [x for s, x in zip(*h.series(key)) if s >= step]


def seed_values(runs: dict, key: str, *, last_n: int = 20) -> dict:
    """{label: [value per seed]}: last held-out accuracy, or the mean of the last ``last_n`` steps."""
    return {label: [h.last(key) if key == "acc/heldout" else window_mean(h, key, last=last_n) for h in hists]
            for label, hists in _runs(runs).items()}


def describe(keys) -> str:
    """'key: definition' lines for the given metric keys (from the glossary)."""
    return "\n".join(f"{k}: {METRICS[k]}" for k in keys)


def value_at(h, key: str, x_key: str, x: float) -> float:
    """The last logged value of ``key`` at a row whose ``x_key`` is <= x (e.g. accuracy after a
    budget of responses sampled). NaN when there is none."""
    best = float("nan")
    for r in h.rows:
        v = r.get(key)
        if r.get(x_key, float("inf")) <= x and v is not None and v == v:
            best = v
    return best


def against(runs: dict, key: str, reference: str, *, last_n: int = 20) -> list[dict]:
    """Each label's per-seed values of ``key`` against those of the label ``reference``, best mean first.

    Per label: "values" (one per seed), "mean", "range" (max - min over its seeds), "bar" (the larger
    of its range and the reference's), "gap" (its mean minus the reference's) and "differs": -1, 0 or
    +1, nonzero only when |gap| exceeds the bar (a gap inside the noise between seeds is a tie).
    """
    return against_values(seed_values(runs, key, last_n=last_n), reference)


def against_values(vals: dict, reference: str) -> list[dict]:
    """``against`` for given per-seed values {label: [value per seed]} (a fitted parameter, a pass@k)."""
    if reference not in vals:
        raise ValueError(f"reference must be one of the labels {list(vals)}, got {reference!r}")
    ref = vals[reference]
    ref_mean, ref_range = sum(ref) / len(ref), max(ref) - min(ref)
    rows = []
    for label, v in vals.items():
        mean, spread = sum(v) / len(v), max(v) - min(v)
        gap = mean - ref_mean
        bar = max(spread, ref_range)
        differs = 0 if abs(gap) <= bar else (1 if gap > 0 else -1)
        rows.append({"label": label, "values": v, "mean": mean, "range": spread, "bar": bar, "gap": gap,
                     "differs": differs})
    return sorted(rows, key=lambda r: -r["mean"])


def against_named(by: dict, labels, reference: str) -> str:
    """Arms of ``against`` (``by``: label -> row) in words: 'label (values per seed, gap +0.012, 1.3 x the
    larger seed range)', the range being the larger of the arm's and the reference's; 'none' if none."""
    return ", ".join(f"{k} ({per_seed(by[k]['values'])}, gap {by[k]['gap']:+.3f}, "
                     f"{abs(by[k]['gap']) / max(by[k]['range'], by[reference]['range']):.1f} x the larger seed range)"
                     for k in labels) or "none"


def against_table(rows: list[dict], reference: str, fmt: str = ".3f") -> str:
    """``against``'s rows as text: one line per label with its seeds, mean, seed range, gap and verdict."""
    lab_w = max(len(r["label"]) for r in rows)
    seeds_w = max(len(per_seed(r["values"], fmt)) for r in rows)
    head = f"{'run':<{lab_w}}  {'seeds':^{seeds_w}}   mean  range  gap to {reference}"
    word = {0: "ties", 1: "above", -1: "below"}
    lines = [head] + [f"{r['label']:<{lab_w}}  {per_seed(r['values'], fmt):<{seeds_w}}  "
                      f"{r['mean']:{fmt}}  {r['range']:{fmt}}  {r['gap']:+{fmt}}  {word[r['differs']]}"
                      for r in rows]
    return "\n".join(lines)


def plot_seed_values(rows: list[dict], key: str, *, reference: str | None = None, title: str | None = None,
                     size=(8.4, None), dpi: int = 100):
    """``against``'s rows as a dot plot: one line per label, a dot per seed, a bar at the mean; a band
    at the reference's seed range when ``reference`` is given. Returns the (closed) Figure."""
    n = len(rows)
    fig, ax = plt.subplots(figsize=(size[0], size[1] or 0.5 + 0.26 * n), dpi=dpi)
    if reference is not None:
        ref = next(r for r in rows if r["label"] == reference)["values"]
        ax.axvspan(min(ref), max(ref), color="0.85")
    for i, r in enumerate(rows):
        y = n - 1 - i
        ax.plot(r["values"], [y] * len(r["values"]), "o", color="C0", ms=4, alpha=0.8)
        ax.plot([r["mean"]] * 2, [y - 0.3, y + 0.3], "-", color="black", lw=2)
    ax.set_yticks(range(n))
    ax.set_yticklabels([r["label"] for r in reversed(rows)], fontsize=9)
    ax.set_ylim(-0.7, n - 0.3)
    band = f", grey band = {reference}'s seed range" if reference is not None else ""
    ax.set_xlabel(f"{key}: dots = seeds, bar = mean{band}", fontsize=10)
    ax.tick_params(axis="x", labelsize=10)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig


def identical_runs(runs: dict, *, ignore=("time/", "speed/")) -> list[list[str]]:
    """Groups of labels (two or more, in the runs' order) whose runs logged the same values at every
    step in every seed, wall-clock keys (``ignore``) aside: the same computation, not a close result."""
    def logged(hists):
        return [[{k: v for k, v in r.items() if not k.startswith(ignore)} for r in h.rows] for h in hists]
    groups: list[list[str]] = []
    seen: list = []
    for label, hists in _runs(runs).items():
        values = logged(hists)
        for g, v in zip(groups, seen):
            if v == values:
                g.append(label)
                break
        else:
            groups.append([label])
            seen.append(values)
    return [g for g in groups if len(g) > 1]


def factor_effects(runs: dict, key: str, levels: dict, *, last_n: int = 20) -> list[dict]:
    """Main effects of a grid of runs: ``levels`` = {label: {factor: value}} with two values per factor.

    For each factor, the pairs of runs that differ in that factor alone (same seed, same other
    factors) and the difference of ``key`` within each pair (high value minus low). Per factor:
    "factor", "low", "high", "diffs" (one per pair), "mean", and "consistent": True when every pair's
    difference has the same sign (no pair says the opposite of the mean).
    """
    vals = seed_values(runs, key, last_n=last_n)
    factors = list(next(iter(levels.values())))
    out = []
    for f in factors:
        values = sorted({lv[f] for lv in levels.values()})
        if len(values) != 2:
            raise ValueError(f"factor {f!r} must take two values in the grid, got {values}")
        lo, hi = values
        diffs = []
        for label, lv in levels.items():
            if lv[f] != lo:
                continue
            twin = next(m for m, lw in levels.items()
                        if lw[f] == hi and all(lw[g] == lv[g] for g in factors if g != f))
            diffs += [b - a for a, b in zip(vals[label], vals[twin])]
        mean = sum(diffs) / len(diffs)
        out.append({"factor": f, "low": lo, "high": hi, "diffs": diffs, "mean": mean,
                    "consistent": all(d > 0 for d in diffs) or all(d < 0 for d in diffs)})
    return out


def plot_passk(curves: dict, *, title: str | None = None, size=(8.4, 3.6), dpi: int = 100):
    """pass@k against k (log axis): ``curves`` = {label: [{k: pass@k} per seed]}, one colour per label,
    a thin line per seed and a thick one for the mean. Returns the (closed) Figure."""
    fig, ax = plt.subplots(figsize=size, dpi=dpi)
    for ci, (label, per_seed_curves) in enumerate(curves.items()):
        ks = sorted(per_seed_curves[0])
        for c in per_seed_curves:
            ax.plot(ks, [c[k] for k in ks], "-", color=f"C{ci}", lw=0.9, alpha=0.6)
        ax.plot(ks, [sum(c[k] for c in per_seed_curves) / len(per_seed_curves) for k in ks], "-",
                color=f"C{ci}", lw=2.4, label=label)
    ax.set_xscale("log", base=2)
    return _finish(fig, ax, "k (samples per prompt); thin lines: seeds, thick: their mean", "pass@k (held-out)",
                   title, "lower right")


def plot_fits(runs: dict, fits: dict, *, batch: int, title: str | None = None, size=(8.4, 3.4), dpi: int = 100):
    """Held-out accuracy against compute (response tokens sampled, log axis) for each label and seed,
    with the fitted ScaleRL curve of each (``toy.scaling``): dots = evaluations, lines = fits."""
    from . import scaling
    fig, ax = plt.subplots(figsize=size, dpi=dpi)
    for ci, (label, hists) in enumerate(_runs(runs).items()):
        for si, (h, f) in enumerate(zip(hists, fits[label])):
            steps, comp = scaling.compute_axis(h, batch=batch)
            at = dict(zip(steps, comp))
            ev, acc = h.series("acc/heldout")
            pts = [(at[s], a) for s, a in zip(ev, acc) if s in at]
            ax.plot(*zip(*pts), "o", color=f"C{ci}", ms=3, alpha=0.7, label=label if si == 0 else None)
            xs = [pts[0][0] * (pts[-1][0] / pts[0][0]) ** (i / 60) for i in range(61)]
            ax.plot(xs, scaling.curve(xs, f["R0"], f["A"], f["B"], f["C_mid"]).tolist(), color=f"C{ci}",
                    lw=1.0, linestyle=SEED_STYLES[si % len(SEED_STYLES)])
    ax.set_xscale("log")
    return _finish(fig, ax, "response tokens sampled (compute); dots: evaluations, lines: fits per seed",
                   "acc/heldout", title, "upper left")


def _finish(fig, ax, xlabel: str, ylabel: str, title: str | None, legend_loc: str):
    """Labels, grid, legend and title of a one-panel figure; returns it closed (shown as a cell's value)."""
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, frameon=False, loc=legend_loc)
    if title:
        ax.set_title(title, fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig
