"""Chapter 10's figure: what each naive split of the batch does to the gradient, per aggregation mode."""
from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt

from .aggregation import MODE_COLORS, MODE_LABELS
from .common import bar_offsets, light_grid


def split_error_plot(rows: Sequence[Sequence], title: str = "") -> plt.Figure:
    """``split.ratio_rows``'s rows [mode, strategy, |g|/|g_full|, cosine, ...] as two bar panels, one bar
    per mode for every strategy but the exact one: the gradient's size against the full batch's (log
    scale; 1 is right) and the angle between the two (0 degrees is right; no learning rate repairs it)."""
    modes = list(dict.fromkeys(r[0] for r in rows))
    strategies = [s for s in dict.fromkeys(r[1] for r in rows) if s != "exact"]
    by = {(r[0], r[1]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 4.2), sharey=True)
    height, offsets = bar_offsets(len(modes))
    spare = iter(plt.get_cmap("tab10").colors[4:])
    for j, mode in enumerate(modes):
        ys = [i + offsets[j] for i in range(len(strategies))]
        norms = [by[mode, s][2] for s in strategies]
        angles = [math.degrees(math.acos(max(-1.0, min(1.0, by[mode, s][3])))) for s in strategies]
        kw = dict(color=MODE_COLORS.get(mode) or next(spare), label=MODE_LABELS.get(mode, mode))
        axes[0].barh(ys, [math.log2(n) for n in norms], height, **kw)
        axes[1].barh(ys, angles, height, **kw)
    axes[0].set_xticks(range(-2, 3), ["1/4", "1/2", "1", "2", "4"])
    axes[0].axvline(0, color="black", lw=0.8)
    axes[0].set_xlabel("|g| / |g_full| (log scale; 1 is right)")
    axes[1].set_xlabel("angle between g and g_full (degrees; 0 is right)")
    axes[0].set_yticks(range(len(strategies)), strategies, fontsize=8)
    axes[0].invert_yaxis()
    for ax in axes:
        light_grid(ax, axis="x")
    axes[1].legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
