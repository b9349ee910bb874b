"""Chapter 04's figures: the k1 / k2 / k3 estimators against log r, the drift experiment, their
gradients as losses, and the adaptive controller."""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from ..display import table
from .common import BLUE, GREEN, ORANGE, PURPLE, RED, light_grid, zero_line


KL_COLORS = {"k1": BLUE, "k2": ORANGE, "k3": GREEN}
KL_LABELS = {"k1": r"k1 $= -\log r$", "k2": r"k2 $= \frac{1}{2}(\log r)^2$", "k3": r"k3 $= (r-1) - \log r$"}


def kl_estimator_curves(lo: float = -3.0, hi: float = 3.0) -> plt.Figure:
    """Each estimator's value (left) and its gradient d k / d log pi (right) against log r, both from
    course_lib.kl (the gradient by autograd)."""
    from ..kl import kl_estimate

    log_r = torch.linspace(lo, hi, 301, dtype=torch.float64)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.2, 3.8))
    for kind in ("k1", "k2", "k3"):
        logp = torch.zeros(1, log_r.numel(), dtype=torch.float64, requires_grad=True)
        k = kl_estimate(logp, log_r[None, :], kind=kind)                  # ref_logp = log r, logp = 0
        (g,) = torch.autograd.grad(k.sum(), logp)
        ax1.plot(log_r, k.detach()[0], color=KL_COLORS[kind], lw=2, label=KL_LABELS[kind])
        ax2.plot(log_r, g[0], color=KL_COLORS[kind], lw=2, label=KL_LABELS[kind])
    ax1.set_ylim(-3.2, 6)
    ax2.set_ylim(-8, 4)
    ax1.set_ylabel("value of the estimate")
    ax2.set_ylabel(r"$\partial k / \partial \log\pi$ (as a loss)")
    for ax in (ax1, ax2):
        zero_line(ax)
        ax.axvline(0, color="gray", lw=0.8, ls=":")
        ax.set_xlabel(r"$\log r = \log\pi_{\mathrm{ref}}(x) - \log\pi(x)$")
        light_grid(ax)
    ax1.legend(fontsize=10, loc="upper center")
    fig.tight_layout()
    return fig


def kl_drift_table(result) -> str:
    """Exact KL and each estimator's mean, bias, std and negative share (a sim.kl.SampledKL)."""
    n = result.log_r.numel()
    rows = [[kind, s.mean, s.mean - result.exact, (s.mean - result.exact) / result.exact,
             (s.mean - result.exact) / (s.std / n ** 0.5), s.std, s.std / result.exact, 100 * s.negative]
            for kind, s in result.stats.items()]
    head = f"exact KL(pi || pi_ref) = {result.exact:.4f}   ({result.log_r.numel()} tokens sampled from pi)"
    return head + "\n" + table(rows, ["", "mean", "bias", "bias/KL", "bias/s.e.", "std", "std/KL", "% negative"],
                               ["s", ".4f", "+.4f", "+.3f", "+.1f", ".4f", ".2f", ".0f"])


def kl_drift_figure(result, drift: float) -> plt.Figure:
    """Where the sampled log r fall, with the three estimators drawn over them; bias and spread."""
    from ..kl import kl_estimate

    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(12.8, 3.6), gridspec_kw={"width_ratios": [1.6, 1, 1]})
    lr = result.log_r
    lo, hi = float(lr.min()), float(lr.max())
    ax0.hist(lr.tolist(), bins=80, color="#cccccc", density=True)
    ax0.set_xlabel(r"$\log r$ of the sampled tokens")
    ax0.set_ylabel("density (grey)")
    axk = ax0.twinx()
    grid = torch.linspace(lo, hi, 200, dtype=torch.float64)
    for kind in ("k1", "k2", "k3"):
        k = kl_estimate(torch.zeros(1, 200, dtype=torch.float64), grid[None, :], kind=kind)[0]
        axk.plot(grid, k, color=KL_COLORS[kind], lw=2, label=kind)
    axk.set_ylabel("estimate")
    axk.legend(fontsize=9, loc="upper center", ncols=3)
    ax0.set_title(f"drift = {drift:.2f}", fontsize=11)
    kinds = list(result.stats)
    bias = [(result.stats[k].mean - result.exact) / result.exact for k in kinds]
    spread = [result.stats[k].std / result.exact for k in kinds]
    colors = [KL_COLORS[k] for k in kinds]
    ax1.bar(kinds, bias, color=colors)
    zero_line(ax1)
    ax1.set_title("bias / KL", fontsize=11)
    ax2.bar(kinds, spread, color=colors)
    ax2.set_title("std of one sample / KL", fontsize=11)
    for ax in (ax1, ax2):
        ax.grid(axis="y", alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def kl_drift_view(drift: float) -> tuple[str, plt.Figure]:
    """What the chapter-04 drift panel shows: the seed's experiment (V = 1000, 100 000 samples, seed 0)
    at another drift."""
    from ..sim.kl import sampled_kl

    result = sampled_kl(drift=drift)
    return kl_drift_table(result), kl_drift_figure(result, drift)


def kl_gradient_scatter(grads: dict) -> plt.Figure:
    """Expected gradient of each estimator used as a loss (y) against the true gradient of the reverse
    KL (x), one point per logit; the forward KL's gradient for comparison."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    x = grads["reverse"]
    lim = float(torch.cat([x, grads["forward"]]).abs().max()) * 1.1
    ax.plot([-lim, lim], [-lim, lim], color="black", lw=0.8, ls=":", label="y = x")
    ax.scatter(x, grads["forward"], s=70, facecolors="none", edgecolors=PURPLE, lw=1.5,
               label=r"$\nabla$ forward KL$(\pi_{\mathrm{ref}}\|\pi)$")
    for kind, marker in (("k1", "s"), ("k2", "o"), ("k3", "x")):
        ax.scatter(x, grads[kind], s=18, marker=marker, color=KL_COLORS[kind], label=f"E[grad {kind}]")
    ax.set_xlabel(r"$\nabla$ reverse KL$(\pi\|\pi_{\mathrm{ref}})$, per logit")
    ax.set_ylabel("expected gradient, per logit")
    ax.legend(fontsize=9, loc="upper left")
    light_grid(ax)
    fig.tight_layout()
    return fig


def adaptive_kl_plot(adaptive, fixed, target_kl: float) -> plt.Figure:
    """beta and the KL over training, adaptive controller vs fixed beta (sim.kl.ControllerRun)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.2, 3.6))
    steps = range(len(adaptive.beta))
    ax1.plot(steps, adaptive.beta.tolist(), color=RED, lw=2, label="adaptive")
    ax1.plot(steps, fixed.beta.tolist(), color="gray", lw=2, ls="--", label="fixed")
    ax1.set_ylabel(r"$\beta$")
    ax2.plot(steps, adaptive.kl.tolist(), color=RED, lw=2, label="adaptive")
    ax2.plot(steps, fixed.kl.tolist(), color="gray", lw=2, ls="--", label="fixed")
    ax2.axhline(target_kl, color="black", lw=1, ls=":", label=f"target {target_kl:g}")
    ax2.set_ylabel(r"KL$(\pi\|\pi_{\mathrm{ref}})$")
    ax2.set_ylim(0, max(2.2 * target_kl, 1.3 * float(fixed.kl.max())))
    for ax in (ax1, ax2):
        ax.set_xlabel("training step")
        light_grid(ax)
        ax.legend(fontsize=9, loc="upper right")
    fig.tight_layout()
    return fig


def adaptive_kl_view(target_kl: float) -> tuple[str, plt.Figure]:
    """What the chapter-04 controller panel shows (the toy policy of sim.kl.adaptive_kl_run)."""
    from ..sim.kl import adaptive_kl_run

    ada = adaptive_kl_run(target_kl)
    fix = adaptive_kl_run(target_kl, adaptive=False)
    tail = slice(-500, None)
    rows = [["adaptive", float(ada.beta[-1]), float(ada.kl[tail].mean()), float(ada.kl[tail].mean()) / target_kl],
            ["fixed", float(fix.beta[-1]), float(fix.kl[tail].mean()), float(fix.kl[tail].mean()) / target_kl]]
    text = table(rows, ["beta", "final beta", "KL, last 500 steps", "KL / target"], ["s", ".4f", ".4f", ".2f"])
    return f"target KL = {target_kl:g}\n" + text, adaptive_kl_plot(ada, fix, target_kl)
