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


# ---- chapter 06 ----
MISMATCH_COLORS = {"none": "#7f7f7f", "is": "#d62728", "tis": "#1f77b4", "mis": "#2ca02c"}


def mismatch_scatter(pi: torch.Tensor, mu: torch.Tensor) -> plt.Figure:
    """Each action's probability under the trainer (pi) against the sampler (mu), log-log, with the
    ratio pi/mu on the right: where the two disagree and by how much."""
    ratio = pi / mu
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.loglog(mu, pi, ".", color="#1f77b4", ms=6)
    far = ratio > 2
    ax1.loglog(mu[far], pi[far], "o", mfc="none", color="#d62728", ms=10, label=r"$\pi/\mu > 2$")
    lo = float(torch.minimum(pi.min(), mu.min()))
    ax1.plot([lo, 1], [lo, 1], "k--", lw=0.8, label=r"$\pi = \mu$")
    ax1.set_xlabel(r"sampler $\mu(a)$")
    ax1.set_ylabel(r"trainer $\pi(a)$")
    ax1.legend(loc="upper left", fontsize=10)
    order = torch.argsort(pi, descending=True)
    ax2.semilogy(range(len(pi)), ratio[order], ".", color="#1f77b4", ms=6)
    ax2.axhline(2.0, color="#d62728", lw=1, ls=":", label="cap C = 2")
    ax2.set_xlabel(r"action, from most to least likely under $\pi$")
    ax2.set_ylabel(r"$\rho = \pi(a)/\mu(a)$")
    ax2.legend(loc="upper right", fontsize=10)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def cap_tradeoff_plot(caps, sweep: dict, fixed: dict, mark: float | None = None) -> plt.Figure:
    """Bias and single-batch noise of TIS and MIS against the cap C (``sweep``: {kind: [(bias,
    noise)]}), with no correction and plain IS (``fixed``: {kind: (bias, noise)}) as lines."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for j, (ax, what) in enumerate(zip(axes, ("bias", "noise of one batch (RMS)"))):
        for kind in ("none", "is"):
            ax.axhline(100 * fixed[kind][j], color=MISMATCH_COLORS[kind], ls="--", lw=1.2,
                       label={"none": "no correction", "is": "IS (no cap)"}[kind])
        for kind, label in (("tis", "TIS: min(rho, C)"), ("mis", "MIS: rho 1[rho <= C]")):
            ax.plot(caps, [100 * p[j] for p in sweep[kind]], "-", color=MISMATCH_COLORS[kind],
                    label=label, lw=2)
        if mark is not None:
            ax.axvline(mark, color="black", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("cap C (log scale)")
        ax.set_ylabel(f"{what}, % of |true gradient|")
        ax.grid(alpha=0.3)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=10)
    fig.tight_layout()
    return fig


def level_plot(rows) -> plt.Figure:
    """Relative bias and noise of the token- vs sequence-level estimators against the length L."""
    names = list(rows[0].bias)
    Ls = [r.L for r in rows]
    colors = dict(zip(names, ("#7f7f7f", "#ff7f0e", "#d62728", "#1f77b4")))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, attr, what in zip(axes, ("bias", "noise"), ("bias", "noise of one batch")):
        for name in names:
            ax.plot(Ls, [100 * getattr(r, attr)[name] for r in rows], "o-", label=name,
                    color=colors[name], ms=4)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("response length L (tokens)")
        ax.set_ylabel(f"{what}, % of |true gradient|")
        ax.grid(alpha=0.3)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=10)
    fig.tight_layout()
    return fig


def stale_plot(lags, quantiles: list, table: dict) -> plt.Figure:
    """Left: the ratio pi/mu a trainer sees when its sampler is k steps behind (1%, 50%, 99%
    quantiles). Right: bias of each correction against the lag."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.fill_between(lags, [q["p01"] for q in quantiles], [q["p99"] for q in quantiles],
                     color="#1f77b4", alpha=0.25, label="1% to 99% of sampled tokens")
    ax1.plot(lags, [q["median"] for q in quantiles], "o-", color="#1f77b4", label="median")
    ax1.axhline(2.0, color="#d62728", lw=1, ls=":", label="cap C = 2")
    ax1.set_xlabel("sampler lag k (optimiser steps behind)")
    ax1.set_ylabel(r"$\rho = \pi/\mu$")
    ax1.legend(loc="upper left", fontsize=10)
    for kind, label in (("none", "no correction"), ("is", "IS"), ("tis", "TIS (C=2)"),
                        ("mis", "MIS (C=2)")):
        ax2.plot(lags, [100 * table[k][kind][0] for k in lags], "o-", color=MISMATCH_COLORS[kind],
                 label=label, ms=4)
    ax2.set_xlabel("sampler lag k (optimiser steps behind)")
    ax2.set_ylabel("bias, % of |true gradient|")
    ax2.legend(loc="upper left", fontsize=10)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
