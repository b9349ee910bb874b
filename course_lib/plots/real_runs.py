"""Chapter 13's figures: the stored GRPO runs on the real model, curve by curve per arm and seed, which change
comes first, the held-out measurement before and after training, and its pass@k curves. Presentation only:
every number comes from ``course_lib.lm.runs``."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..lm.runs import TRL_NAMES, after, before, half_way_step, series, trailing_mean, trl_series
from .common import BLUE, GREEN, GREY, ORANGE, RED, finish_step_panels, light_grid, title_and_legend_on_top

ARM_COLOURS = {"grpo": BLUE, "token_sum": ORANGE, "lr_5e-6": GREEN, "lr_5e-5": RED}
ARM_LABELS = {"grpo": "GRPO (sequence mean)", "token_sum": "token sum / 48", "lr_5e-6": "GRPO, lr 5e-6",
              "lr_5e-5": "GRPO, lr 5e-5"}
SEED_STYLES = ("-", "--", ":")            # seed 0, 1, 2: a line's style tells the seeds of an arm apart
SEED_MARKERS = ("o", "s", "^")


def seed_style(i: int) -> str:
    return SEED_STYLES[i % len(SEED_STYLES)]


def seed_marker(i: int) -> str:
    return SEED_MARKERS[i % len(SEED_MARKERS)]


def _with_seeds(ax, seeds, *, marker: bool = False) -> tuple[list, list]:
    """The legend entries of ``ax``'s labelled lines (the arms' colours) followed by one black entry per seed:
    its line style, or its marker."""
    handles, labels = ax.get_legend_handles_labels()
    for i, seed in enumerate(seeds):
        handles.append(plt.Line2D([], [], color="black", lw=1.2, ls="none" if marker else seed_style(i),
                                  marker=seed_marker(i) if marker else None))
        labels.append(f"seed {seed}")
    return handles, labels


# (metric, panel title)
CURVES = (("reward/mean", "reward (exact + 0.5 x format)"), ("acc/sampled", "sampled accuracy (training prompts)"),
          ("replies/formatted", "format rate: 'Answer: n' stated"),
          ("acc/heldout", "held-out greedy accuracy (54 questions)"),
          ("len/all", "reply length (tokens)"), ("len/truncated_frac", "share cut at 48 tokens"),
          ("entropy/mean", "entropy per token (nats)"), ("kl/ref", "KL to the pretrained model, per token"),
          ("grad/norm", "gradient norm (before clipping at 1)"),
          ("groups/zero_signal_frac", "groups without signal (all 4 rewards equal)"))


def run_curves(arms: dict[str, dict[int, dict]], curves=CURVES) -> plt.Figure:
    """One panel per metric: each seed's run thin, its 5-step moving average thick (evaluation metrics, measured
    every 10 steps, as points joined by lines), one colour per arm and one line style per seed; the legend sits
    beside the panels, not over them."""
    n = len(curves)
    cols = 3
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(11, 2.6 * ((n + cols - 1) // cols)),
                             squeeze=False)
    for ax, (key, title) in zip(axes.flat, curves):
        for arm, runs in arms.items():
            colour = ARM_COLOURS.get(arm, GREY)
            for i, (seed, run) in enumerate(runs.items()):
                steps, values = series(run, key)
                label = f"{ARM_LABELS.get(arm, arm)}" if i == 0 else None
                if key in ("acc/heldout", "kl/ref"):
                    ax.plot(steps, values, marker="o", ls=seed_style(i), color=colour, lw=1.2, ms=3.5, alpha=0.8,
                            label=label)
                else:
                    ax.plot(steps, values, color=colour, lw=0.6, alpha=0.3, ls=seed_style(i))
                    ax.plot(steps, trailing_mean(values), color=colour, lw=1.6, alpha=0.9, ls=seed_style(i),
                            label=label)
    finish_step_panels(axes, [title for _, title in curves])
    seeds = sorted({s for runs in arms.values() for s in runs})
    title_and_legend_on_top(fig, "GRPO on SmolLM2-135M-Instruct: one line per seed (thin: each step; thick: "
                             "5-step mean)", *_with_seeds(axes.flat[0], seeds))
    return fig


def before_after_plot(task_record: dict, arms: dict[str, dict[int, dict]],
                      names=("pass@1", "exact if finished", "greedy accuracy", "finished", "format",
                             "right sum anywhere", "no sum")) -> plt.Figure:
    """Each held-out quantity before training (the pretrained model, one measurement) and after (one marker per
    training seed: its shape; one colour per arm); the legend below the axes, not over the dots."""
    fig, ax = plt.subplots(figsize=(10, 3.9))
    for x, name in enumerate(names):
        ax.plot([x - 0.25], [before(task_record, name)], "D", color=GREY, ms=7,
                label="before (pretrained)" if x == 0 else None)
        for j, (arm, runs) in enumerate(arms.items()):
            for i, value in enumerate(after(runs, name)):
                ax.plot([x + 0.05 + 0.2 * j], [value], seed_marker(i), color=ARM_COLOURS.get(arm, GREY), ms=6,
                        alpha=0.8, label=f"after: {ARM_LABELS.get(arm, arm)}" if x == 0 and i == 0 else None)
    ax.set_xticks(range(len(names)), [n.replace(" ", "\n", 1) if len(n) > 12 else n for n in names], fontsize=8)
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("share of held-out replies")
    ax.set_title("Held-out questions (pairs never trained on), before and after training: one marker per seed")
    seeds = sorted({s for runs in arms.values() for s in runs})
    handles, labels = _with_seeds(ax, seeds, marker=True)
    ax.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(handles),
              frameon=False)
    light_grid(ax, axis="y")
    fig.tight_layout()
    return fig


# (metric, label, its change): which of three changes covers half of itself first
FIRST = (("len/truncated_frac", "stopping (share cut at 48 falls)"), ("acc/sampled", "accuracy rises"),
         ("replies/formatted", "format rises"))


def moves_first_plot(arms: dict[str, dict[int, dict]], width: int = 5) -> plt.Figure:
    """One row per run: the step at which each change has covered half of itself (``lm.runs.half_way_step``; no
    marker where it did not change)."""
    labels = [f"{ARM_LABELS.get(arm, arm)}, seed {s}" for arm, by_seed in arms.items() for s in by_seed]
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * len(labels) + 1.2))
    for (key, label), colour, marker in zip(FIRST, (GREY, BLUE, ORANGE), ("s", "o", "^")):
        steps = [half_way_step(run, key, width) for by_seed in arms.values() for run in by_seed.values()]
        moved = [(s, y) for y, s in enumerate(steps) if s is not None]      # a share that never moved: no marker
        ax.plot([s for s, _ in moved], [y for _, y in moved], marker, color=colour, ms=8, alpha=0.85, label=label)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"RL step at which the {width}-step mean has covered half of its change")
    ax.set_title("What moves first, run by run", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    light_grid(ax, axis="x")
    fig.tight_layout()
    return fig


def passk_plot(base: dict[int, float], trained: dict[str, dict[int, float]]) -> plt.Figure:
    """pass@k against k (log scale): the pretrained model's curve and one per trained run."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ax.plot(list(base), list(base.values()), "D-", color=GREY, lw=2, ms=5, label="before (pretrained)")
    for name, curve in trained.items():
        arm, _, seed = name.partition(", seed ")
        ax.plot(list(curve), list(curve.values()), marker="o", ls=seed_style(int(seed) if seed.isdigit() else 0),
                color=ARM_COLOURS.get(arm, GREY), lw=1.2, ms=4, alpha=0.75, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(base), [str(k) for k in base])
    ax.set_xlabel("k (replies drawn per question)")
    ax.set_ylabel("held-out pass@k")
    ax.set_title("pass@k on the held-out questions, before and after training", fontsize=10)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    light_grid(ax)
    fig.tight_layout()
    return fig


def trl_curve_plot(trl_record: dict, runs: dict[int, dict],
                   keys=("reward/mean", "acc/sampled", "replies/formatted", "len/all", "len/truncated_frac",
                         "groups/zero_signal_frac")) -> plt.Figure:
    """TRL's own run of the same config (one seed) beside the course's seeds: a 5-step mean of each."""
    titles = dict(CURVES)
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.2))
    for ax, key in zip(axes.flat, keys):
        for i, (seed, run) in enumerate(runs.items()):
            steps, values = series(run, key)
            ax.plot(steps, trailing_mean(values), color=BLUE, lw=1.2, alpha=0.7, ls=seed_style(i),
                    label=f"the course, seed {seed}")
        steps, values = trl_series(trl_record, key)
        ax.plot(steps, trailing_mean(values), color=RED, lw=2, label="TRL GRPOTrainer, seed 0")
        ax.set_title(f"{titles.get(key, key)}\n(TRL: {TRL_NAMES[key]})", fontsize=8)
        ax.tick_params(labelsize=8)
        light_grid(ax)
    for ax in axes[-1]:
        ax.set_xlabel("RL step", fontsize=8)
    title_and_legend_on_top(fig, "The same config in TRL and in the course's trainer (5-step means)",
                             *axes.flat[0].get_legend_handles_labels())
    return fig
