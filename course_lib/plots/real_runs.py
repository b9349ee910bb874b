"""Chapter 13's figures: the stored GRPO runs on the real model, curve by curve per arm and seed, and the
held-out measurement before and after training. Presentation only: every number comes from
``course_lib.lm.runs``."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..lm.runs import after, before, format_rate, series
from .common import BLUE, GREY, ORANGE, light_grid

ARM_COLOURS = {"grpo": BLUE, "token_sum": ORANGE}
ARM_LABELS = {"grpo": "GRPO (sequence mean)", "token_sum": "token sum / 48"}
# (metric, panel title); "format" is derived from the reward (lm.runs.format_rate)
CURVES = (("reward/mean", "reward (exact + 0.5 x format)"), ("acc/sampled", "sampled accuracy (training prompts)"),
          ("format", "format rate: 'Answer: n' stated"), ("acc/heldout", "held-out greedy accuracy (60 questions)"),
          ("len/all", "reply length (tokens)"), ("len/truncated_frac", "share cut at 48 tokens"),
          ("entropy/mean", "entropy per token (nats)"), ("kl/ref", "KL to the pretrained model, per token"),
          ("grad/norm", "gradient norm (before clipping at 1)"))


def _smooth(values: list[float], width: int = 5) -> list[float]:
    """A trailing moving average (the first points average what there is)."""
    return [sum(values[max(0, i - width + 1): i + 1]) / len(values[max(0, i - width + 1): i + 1])
            for i in range(len(values))]


def run_curves(arms: dict[str, dict[int, dict]], curves=CURVES) -> plt.Figure:
    """One panel per metric: each seed's run thin, its 5-step moving average thick (evaluation metrics, measured
    every 10 steps, as points joined by lines), one colour per arm."""
    n = len(curves)
    cols = 3
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(11, 2.6 * ((n + cols - 1) // cols)),
                             squeeze=False)
    for ax, (key, title) in zip(axes.flat, curves):
        for arm, runs in arms.items():
            colour = ARM_COLOURS.get(arm, GREY)
            for i, (seed, run) in enumerate(runs.items()):
                steps, values = format_rate(run) if key == "format" else series(run, key)
                label = f"{ARM_LABELS.get(arm, arm)}" if i == 0 else None
                if key in ("acc/heldout", "kl/ref"):
                    ax.plot(steps, values, "o-", color=colour, lw=1.2, ms=3.5, alpha=0.8, label=label)
                else:
                    ax.plot(steps, values, color=colour, lw=0.6, alpha=0.35)
                    ax.plot(steps, _smooth(values), color=colour, lw=1.6, alpha=0.9, label=label)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        light_grid(ax)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("RL step", fontsize=8)
    axes.flat[0].legend(fontsize=7, loc="best")
    fig.suptitle("GRPO on SmolLM2-135M-Instruct: one line per seed (thin: each step; thick: 5-step mean)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def before_after_plot(task_record: dict, arms: dict[str, dict[int, dict]],
                      names=("pass@1", "pass@8", "greedy accuracy", "format", "truncated")) -> plt.Figure:
    """Each held-out quantity before training (one dot per sampling seed) and after (one dot per training seed
    and arm)."""
    fig, ax = plt.subplots(figsize=(8.5, 3.4))
    for x, name in enumerate(names):
        b = before(task_record, name)
        ax.plot([x - 0.25] * len(b), b, "o", color=GREY, ms=6, label="before (pretrained)" if x == 0 else None)
        for j, (arm, runs) in enumerate(arms.items()):
            a = after(runs, name)
            ax.plot([x + 0.05 + 0.2 * j] * len(a), a, "o", color=ARM_COLOURS.get(arm, GREY), ms=6,
                    label=f"after: {ARM_LABELS.get(arm, arm)}" if x == 0 else None)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("share of held-out replies")
    ax.set_title("Held-out questions (never trained on), before and after training: one dot per seed")
    ax.legend(fontsize=8, loc="upper right")
    light_grid(ax, axis="y")
    fig.tight_layout()
    return fig
