"""Chapter 06's figures: the sampler/learner mismatch, the cap C as a bias-variance dial, token vs
sequence level, and stale samplers."""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from .common import BLUE, GREEN, GREY, ORANGE, RED, light_grid


MISMATCH_COLORS = {"none": GREY, "is": RED, "tis": BLUE, "mis": GREEN}


def mismatch_scatter(pi: torch.Tensor, mu: torch.Tensor) -> plt.Figure:
    """Each action's probability under the trainer (pi) against the sampler (mu), log-log, with the
    ratio pi/mu on the right: where the two disagree and by how much."""
    ratio = pi / mu
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.loglog(mu, pi, ".", color=BLUE, ms=6)
    far = ratio > 2
    ax1.loglog(mu[far], pi[far], "o", mfc="none", color=RED, ms=10, label=r"$\pi/\mu > 2$")
    lo = float(torch.minimum(pi.min(), mu.min()))
    ax1.plot([lo, 1], [lo, 1], "k--", lw=0.8, label=r"$\pi = \mu$")
    ax1.set_xlabel(r"sampler $\mu(a)$")
    ax1.set_ylabel(r"trainer $\pi(a)$")
    ax1.legend(loc="upper left", fontsize=10)
    order = torch.argsort(pi, descending=True)
    ax2.semilogy(range(len(pi)), ratio[order], ".", color=BLUE, ms=6)
    ax2.axhline(2.0, color=RED, lw=1, ls=":", label="cap C = 2")
    ax2.set_xlabel(r"action, from most to least likely under $\pi$")
    ax2.set_ylabel(r"$\rho = \pi(a)/\mu(a)$")
    ax2.legend(loc="upper right", fontsize=10)
    for ax in (ax1, ax2):
        light_grid(ax)
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
        light_grid(ax)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=10)
    fig.tight_layout()
    return fig


def level_plot(rows) -> plt.Figure:
    """Relative bias and noise of the token- vs sequence-level estimators against the length L."""
    names = list(rows[0].bias)
    Ls = [r.L for r in rows]
    colors = dict(zip(names, (GREY, ORANGE, RED, BLUE)))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, attr, what in zip(axes, ("bias", "noise"), ("bias", "noise of one batch")):
        for name in names:
            ax.plot(Ls, [100 * getattr(r, attr)[name] for r in rows], "o-", label=name,
                    color=colors[name], ms=4)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("response length L (tokens)")
        ax.set_ylabel(f"{what}, % of |true gradient|")
        light_grid(ax)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=10)
    fig.tight_layout()
    return fig


def stale_plot(lags, quantiles: list, table: dict) -> plt.Figure:
    """Left: the ratio pi/mu a trainer sees when its sampler is k steps behind (1%, 50%, 99%
    quantiles). Right: bias of each correction against the lag."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.fill_between(lags, [q["p01"] for q in quantiles], [q["p99"] for q in quantiles],
                     color=BLUE, alpha=0.25, label="1% to 99% of sampled tokens")
    ax1.plot(lags, [q["median"] for q in quantiles], "o-", color=BLUE, label="median")
    ax1.axhline(2.0, color=RED, lw=1, ls=":", label="cap C = 2")
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
        light_grid(ax)
    fig.tight_layout()
    return fig
