"""The LoRA chapter's figures: a learning-rate sweep per setting (full fine-tuning, LoRA ranks). Presentation
only: every number comes from ``course_lib.lm.sweep``."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..lm.sweep import good_band
from .common import BLUE, GREEN, ORANGE, PURPLE, light_grid

SETTING_COLOURS = {"full": BLUE, "rank 1": ORANGE, "rank 8": GREEN, "rank 32": PURPLE}


def sweep_plot(sweeps: dict[str, dict[float, dict[int, float]]], *, ylabel: str, title: str,
               baseline: tuple[str, float] | None = None) -> plt.Figure:
    """Per setting (``lm.sweep.sweep``'s output), each seed's value at each learning rate as a dot, the mean of
    the seeds as a line, and the good band (``lm.sweep.good_band``) as a bar under the curves; ``baseline``
    (label, value), such as the model before training, as a dashed line across."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for i, (name, points) in enumerate(sweeps.items()):
        colour = SETTING_COLOURS.get(name, "black")
        lrs = sorted(points)
        means = [sum(points[lr].values()) / len(points[lr]) for lr in lrs]
        ax.plot(lrs, means, color=colour, lw=1.6, label=f"{name} (mean of the seeds)")
        for lr in lrs:
            ax.scatter([lr] * len(points[lr]), list(points[lr].values()), color=colour, s=14, alpha=0.7, lw=0)
        lo, hi = good_band(points)
        ax.plot([lo, hi], [-0.04 - 0.04 * i] * 2, color=colour, lw=5, solid_capstyle="butt",
                label=f"{name}: as good as its best")
    if baseline is not None:
        ax.axhline(baseline[1], color="grey", ls="--", lw=1, label=baseline[0])
    ax.set_xscale("log")
    ax.set_xlabel("learning rate", fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    light_grid(ax)
    fig.tight_layout()
    return fig
