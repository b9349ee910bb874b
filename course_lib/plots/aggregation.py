"""Chapter 03's figures: the per-token and per-response weights of the four aggregation modes, the
length sweep, and DAPO's overlong penalty."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch

from ..display import table
from .common import BLUE, GREEN, GREY, ORANGE, RED, light_grid, zero_line


MODE_LABELS = {"seq-mean-token-mean": "seq-mean (GRPO)", "token-mean": "token-mean (DAPO)",
               "seq-mean-token-sum-norm": "sum / L_max (Dr. GRPO)", "seq-mean-token-sum": "seq-sum"}
MODE_COLORS = {"seq-mean-token-mean": BLUE, "token-mean": RED,
               "seq-mean-token-sum-norm": ORANGE, "seq-mean-token-sum": GREY}


def aggregation_tables(rewards: Sequence[float], lengths: Sequence[int], max_len: int) -> str:
    """Two aligned tables (weight of one token; weight of the whole response) for all four modes."""
    from ..sim.aggregation import MODES, response_weights

    ws = {m: response_weights(rewards, lengths, m, max_len) for m in MODES}
    adv = ws[MODES[0]].adv
    heads = ["i", "reward", "length", "adv"] + [MODE_LABELS[m] for m in MODES]
    out = []
    for title, field, fmt in (("weight of ONE token  (alpha_i * A_i)", "per_token", "+.2e"),
                              ("weight of the WHOLE response  (sum over its tokens)", "whole", "+.3f")):
        rows = [[i, float(rewards[i]), int(lengths[i]), float(adv[i])]
                + [float(getattr(ws[m], field)[i]) for m in MODES] for i in range(len(lengths))]
        out.append(title + "\n" + table(rows, heads, ["d", ".2f", "d", "+.3f"] + [fmt] * len(MODES)))
    return "\n\n".join(out)


def aggregation_bars(rewards: Sequence[float], lengths: Sequence[int], max_len: int) -> plt.Figure:
    """Per-token (top) and whole-response (bottom) weights, one column of axes per mode (each with
    its own scale: the modes differ by orders of magnitude, which the tables show)."""
    from ..sim.aggregation import MODES, response_weights

    fig, axes = plt.subplots(2, len(MODES), figsize=(12.8, 5.6))
    x = range(len(lengths))
    for j, mode in enumerate(MODES):
        w = response_weights(rewards, lengths, mode, max_len)
        for row, (vals, what) in enumerate(((w.per_token, "one token"), (w.whole, "whole response"))):
            ax = axes[row, j]
            colors = [GREEN if v > 0 else RED for v in vals.tolist()]
            ax.bar(x, vals.tolist(), color=colors)
            zero_line(ax)
            ax.set_xticks(list(x), [f"y{i}\nR={float(rewards[i]):g}\nL={int(lengths[i])}"
                                    for i in x], fontsize=9)
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
            if row == 0:
                ax.set_title(MODE_LABELS[mode], fontsize=11, pad=16)
            if j == 0:
                ax.set_ylabel(f"weight of\n{what}")
            ax.grid(axis="y", alpha=0.3)
    fig.subplots_adjust(left=0.07, right=0.99, top=0.9, bottom=0.13, wspace=0.32, hspace=0.62)
    return fig


def aggregation_view(rewards: Sequence[float], lengths: Sequence[int],
                     max_len: int) -> tuple[str, plt.Figure]:
    """What the chapter-03 panel shows: the tables and the bars for one group."""
    return aggregation_tables(rewards, lengths, max_len), aggregation_bars(rewards, lengths, max_len)


def length_sweep_plot(rewards: Sequence[float], lengths: Sequence[int], index: int,
                      sweep: Sequence[int], max_len: int) -> plt.Figure:
    """Response ``index``'s push per token and in total as its length grows, all four modes,
    each relative to its own value at the shortest length (log-log)."""
    from ..sim.aggregation import MODES, length_sweep

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.2, 3.8))
    for mode in MODES:
        per_tok, whole = length_sweep(rewards, lengths, index, sweep, mode, max_len)
        kw = dict(label=MODE_LABELS[mode], color=MODE_COLORS[mode],
                  lw=4 if mode == "seq-mean-token-sum-norm" else 2,
                  ls="--" if mode == "seq-mean-token-sum" else "-")     # these two overlap exactly
        ax1.plot(sweep, (per_tok / per_tok[0]).tolist(), **kw)
        ax2.plot(sweep, (whole / whole[0]).tolist(), **kw)
    ax1.set_ylabel("push per token\n(relative to the shortest)")
    ax2.set_ylabel("push on the whole response\n(relative to the shortest)")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"length of response y{index} (tokens)")
        light_grid(ax, which="both")
    ax2.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    return fig


def overlong_penalty_plot(max_len: int, cache_len: int) -> plt.Figure:
    """DAPO's soft overlong punishment R_length(|y|) (Eq. 13), computed by rewards.overlong_penalty."""
    from ..rewards import overlong_penalty

    lengths = torch.arange(0, max_len + max_len // 8 + 1, max(1, max_len // 2000))
    pen = overlong_penalty(lengths, max_len, cache_len)
    fig, ax = plt.subplots(figsize=(7.2, 3.4))
    ax.plot(lengths.tolist(), pen.tolist(), lw=2, color=RED)
    for x, label in ((max_len - cache_len, r"$L_{\max}-L_{\mathrm{cache}}$"), (max_len, r"$L_{\max}$")):
        ax.axvline(x, color="gray", ls="--", lw=1)
        ax.text(x, 0.12, label, ha="center", fontsize=10)
    ax.set_ylim(-1.15, 0.3)
    ax.set_xlabel("response length |y| (tokens)")
    ax.set_ylabel(r"$R_{\mathrm{length}}$ (added to the reward)")
    ax.set_title(f"DAPO soft overlong punishment, L_max = {max_len}, L_cache = {cache_len}", fontsize=11)
    light_grid(ax)
    fig.tight_layout()
    return fig
