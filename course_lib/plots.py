"""Figures for the chapters: each function takes data (or a small spec), calls the library for
every number, and returns a matplotlib Figure. Presentation only."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch

from . import advantages as adv_lib
from .display import table

COLORS = {"GRPO": "#1f77b4", "Dr. GRPO": "#ff7f0e", "RLOO": "#2ca02c"}


def group_advantage_view(rewards: Sequence[float]) -> tuple[str, plt.Figure]:
    """A table and a bar chart of the GRPO, Dr. GRPO and RLOO advantages of one group (G >= 2):
    what the chapter-02 panel shows."""
    r = torch.tensor(list(rewards), dtype=torch.float32)
    G = r.numel()
    rows = {"GRPO": adv_lib.group_advantages(r, G),
            "Dr. GRPO": adv_lib.dr_grpo_advantages(r, G),
            "RLOO": adv_lib.rloo_advantages(r, G)}
    head = (f"G = {G}   mean = {float(r.mean()):.4f}   std (Bessel) = {float(r.std()):.4f}   "
            f"signal: {'yes' if bool(adv_lib.signal_groups(r, G)[0]) else 'no (all rewards equal)'}")
    body = table([[i, float(r[i])] + [float(rows[k][i]) for k in rows] for i in range(G)],
                 ["i", "reward"] + list(rows), ["d", ".2f", "+.4f", "+.4f", "+.4f"])
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    width = 0.8 / len(rows)
    for j, (name, a) in enumerate(rows.items()):
        ax.bar([i + (j - 1) * width for i in range(G)], a.tolist(), width, label=name, color=COLORS[name])
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(G), [f"y{i}\nR={float(r[i]):.2f}" for i in range(G)])
    ax.set_ylabel("advantage")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return head + "\n" + body, fig


def difficulty_profile(group_size: int) -> plt.Figure:
    """Total |advantage| a question gets, against how many of its G answers are right.

    Both shrink towards k = 0 and k = G, but GRPO's std division shrinks nearly-all-right and
    nearly-all-wrong questions much less than Dr. GRPO's mean-only advantage (fact sheet §3.2).
    """
    ks = list(range(group_size + 1))
    totals = {}
    for name, fn in (("GRPO", adv_lib.group_advantages), ("Dr. GRPO", adv_lib.dr_grpo_advantages)):
        totals[name] = [float(fn(torch.tensor([1.0] * k + [0.0] * (group_size - k)), group_size)
                              .abs().sum()) for k in ks]
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for name, ys in totals.items():
        ax.plot(ks, ys, "o-", label=name, color=COLORS[name])
    ax.set_xlabel(f"correct answers k out of G = {group_size}")
    ax.set_ylabel(r"$\sum_i |A_i|$ for the question")
    ax.legend()
    fig.tight_layout()
    return fig


def signal_curves(group_sizes: Sequence[int] = (4, 8, 16)) -> plt.Figure:
    """P(a group carries signal) and responses drawn per useful group, against the pass rate."""
    p = torch.linspace(0, 1, 201, dtype=torch.float64)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    for G in group_sizes:
        ax1.plot(p, adv_lib.signal_probability(p, G), label=f"G = {G}")
        inner = p[1:-1]
        ax2.plot(inner, adv_lib.samples_per_useful_group(inner, G), label=f"G = {G}")
    ax1.set_xlabel("pass rate p of the prompt")
    ax1.set_ylabel("P(group has signal)")
    ax1.set_title(r"$1 - p^G - (1-p)^G$")
    ax2.set_xlabel("pass rate p of the prompt")
    ax2.set_ylabel("responses sampled per useful group")
    ax2.set_yscale("log")
    ax2.set_title(r"$G / P(\mathrm{signal})$")
    for ax in (ax1, ax2):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def useful_share_plot(mean_pass: Sequence[float], simulated: Sequence[float],
                      analytic: Sequence[float], group_size: int) -> plt.Figure:
    """Share of groups that carry signal in a simulated batch vs the analytic expectation."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.plot(mean_pass, analytic, "-", label="expected (analytic)")
    ax.plot(mean_pass, simulated, "o", label="one simulated batch")
    ax.set_xlabel("mean pass rate of the batch's prompts")
    ax.set_ylabel("share of useful groups")
    ax.set_title(f"G = {group_size}")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


# ---- chapter 03 ----

MODE_LABELS = {"seq-mean-token-mean": "seq-mean (GRPO)", "token-mean": "token-mean (DAPO)",
               "seq-mean-token-sum-norm": "sum / L_max (Dr. GRPO)", "seq-mean-token-sum": "seq-sum"}
MODE_COLORS = {"seq-mean-token-mean": "#1f77b4", "token-mean": "#d62728",
               "seq-mean-token-sum-norm": "#ff7f0e", "seq-mean-token-sum": "#7f7f7f"}


def aggregation_tables(rewards: Sequence[float], lengths: Sequence[int], max_len: int) -> str:
    """Two aligned tables (weight of one token; weight of the whole response) for all four modes."""
    from .sim.aggregation import MODES, response_weights

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
    from .sim.aggregation import MODES, response_weights

    fig, axes = plt.subplots(2, len(MODES), figsize=(12.8, 5.6))
    x = range(len(lengths))
    for j, mode in enumerate(MODES):
        w = response_weights(rewards, lengths, mode, max_len)
        for row, (vals, what) in enumerate(((w.per_token, "one token"), (w.whole, "whole response"))):
            ax = axes[row, j]
            colors = ["#2ca02c" if v > 0 else "#d62728" for v in vals.tolist()]
            ax.bar(x, vals.tolist(), color=colors)
            ax.axhline(0, color="black", lw=0.8)
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
    from .sim.aggregation import MODES, length_sweep

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
        ax.grid(alpha=0.3, which="both")
    ax2.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    return fig


def overlong_penalty_plot(max_len: int, cache_len: int) -> plt.Figure:
    """DAPO's soft overlong punishment R_length(|y|) (Eq. 13), computed by rewards.overlong_penalty."""
    from .rewards import overlong_penalty

    lengths = torch.arange(0, max_len + max_len // 8 + 1, max(1, max_len // 2000))
    pen = overlong_penalty(lengths, max_len, cache_len)
    fig, ax = plt.subplots(figsize=(7.2, 3.4))
    ax.plot(lengths.tolist(), pen.tolist(), lw=2, color="#d62728")
    for x, label in ((max_len - cache_len, r"$L_{\max}-L_{\mathrm{cache}}$"), (max_len, r"$L_{\max}$")):
        ax.axvline(x, color="gray", ls="--", lw=1)
        ax.text(x, 0.12, label, ha="center", fontsize=10)
    ax.set_ylim(-1.15, 0.3)
    ax.set_xlabel("response length |y| (tokens)")
    ax.set_ylabel(r"$R_{\mathrm{length}}$ (added to the reward)")
    ax.set_title(f"DAPO soft overlong punishment, L_max = {max_len}, L_cache = {cache_len}", fontsize=11)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
