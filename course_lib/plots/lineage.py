"""Chapter 14's figures: GRPO and its descendants on the real model, several optimiser steps per batch, each arm
as the mean of its seeds inside the band of their lowest and highest values. Presentation only: every number
comes from ``course_lib.lm.lineage`` and ``course_lib.lm.runs``."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..lm.lineage import LABELS, removed_share, seed_band
from ..lm.runs import trailing_mean
from .common import (BLUE, GREEN, GREY, ORANGE, PURPLE, RED, finish_step_panels, light_grid,
                     title_and_legend_on_top)
from .real_runs import seed_style

# chapter 05's colours for the losses it draws (GRPO blue, DAPO red, CISPO green, SAPO orange); the random
# rewards, drawn beside GRPO alone, take colours GRPO does not have
ARM_COLOURS = {"grpo": BLUE, "dapo": RED, "dr_grpo": GREY, "gspo": PURPLE, "cispo": GREEN, "sapo": ORANGE,
               "random": ORANGE, "random_noclip": RED, "format_only": GREEN}

# (metric, panel title)
LINEAGE_CURVES = (("reward/mean", "reward (exact + 0.5 x format)"), ("acc/sampled", "sampled accuracy"),
                  ("acc/heldout", "held-out greedy accuracy"), ("entropy/mean", "entropy per token (nats)"),
                  ("len/all", "reply length (tokens)"), ("kl/ref", "KL to the pretrained model, per token"),
                  ("ratio/outside_frac", "tokens outside the clip range"), ("grad/norm", "gradient norm"))


def band_curves(arms: dict[str, dict[int, dict]], curves=LINEAGE_CURVES, *, title: str, width: int = 5,
                labels: dict | None = None, colours: dict | None = None) -> plt.Figure:
    """One panel per metric; per arm, the mean of its seeds (a ``width``-step moving average, evaluation metrics
    as points) inside a shaded band from the lowest to the highest seed at each step. ``labels`` and ``colours``
    name and colour arms other than chapter 14's (``LABELS``, ``ARM_COLOURS``)."""
    labels, colours = {**LABELS, **(labels or {})}, {**ARM_COLOURS, **(colours or {})}
    n, cols = len(curves), 4
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 2.5 * rows), squeeze=False)
    for ax, (key, panel) in zip(axes.flat, curves):
        for arm, by_seed in arms.items():
            steps, m, lo, hi = seed_band(by_seed, key)
            colour = colours.get(arm, GREY)
            smooth = key not in ("acc/heldout",)
            line = trailing_mean(m, width) if smooth else m
            ax.fill_between(steps, trailing_mean(lo, width) if smooth else lo,
                            trailing_mean(hi, width) if smooth else hi, color=colour, alpha=0.15, lw=0)
            ax.plot(steps, line, color=colour, lw=1.5, marker=None if smooth else "o", ms=3.5,
                    label=f"{labels.get(arm, arm)} ({len(by_seed)} seed{'s' if len(by_seed) > 1 else ''})")
    finish_step_panels(axes, [panel for _, panel in curves])
    title_and_legend_on_top(fig, title, *axes.flat[0].get_legend_handles_labels())
    return fig


def removed_plot(arms: dict[str, dict[int, dict]], width: int = 5) -> plt.Figure:
    """Per arm, the share whose gradient its clip removes, step by step (``lm.lineage.removed_share``: tokens,
    or GSPO's replies, on a second panel since its unit differs); CISPO and SAPO remove none."""
    fig, (tok, rep) = plt.subplots(1, 2, figsize=(11, 3.0))
    for arm, by_seed in arms.items():
        for i, run in enumerate(by_seed.values()):
            unit, steps, share = removed_share(run)
            ax = rep if unit == "reply" else tok
            ax.plot(steps, trailing_mean(share, width), color=ARM_COLOURS.get(arm, GREY), lw=1.4,
                    ls=seed_style(i), label=LABELS.get(arm, arm) if i == 0 else None)
    tok.set_title("share of the tokens whose gradient the clip removes", fontsize=9)
    rep.set_title("GSPO: share of the replies whose gradient its clip removes", fontsize=9)
    for ax in (tok, rep):
        ax.set_xlabel("RL step", fontsize=8)
        ax.tick_params(labelsize=8)
        light_grid(ax)
    handles, labels = tok.get_legend_handles_labels()
    h2, l2 = rep.get_legend_handles_labels()
    title_and_legend_on_top(fig, f"What the clip removes ({width}-step mean; line style: seed 0, 1, 2)",
                             handles + h2, labels + l2)
    return fig
