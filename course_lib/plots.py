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


# ---- chapter 04 ----

KL_COLORS = {"k1": "#1f77b4", "k2": "#ff7f0e", "k3": "#2ca02c"}
KL_LABELS = {"k1": r"k1 $= -\log r$", "k2": r"k2 $= \frac{1}{2}(\log r)^2$", "k3": r"k3 $= (r-1) - \log r$"}


def kl_estimator_curves(lo: float = -3.0, hi: float = 3.0) -> plt.Figure:
    """Each estimator's value (left) and its gradient d k / d log pi (right) against log r, both from
    course_lib.kl (the gradient by autograd)."""
    from .kl import kl_estimate

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
        ax.axhline(0, color="black", lw=0.8)
        ax.axvline(0, color="gray", lw=0.8, ls=":")
        ax.set_xlabel(r"$\log r = \log\pi_{\mathrm{ref}}(x) - \log\pi(x)$")
        ax.grid(alpha=0.3)
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
    from .kl import kl_estimate

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
    ax1.axhline(0, color="black", lw=0.8)
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
    from .sim.kl import sampled_kl

    result = sampled_kl(drift=drift)
    return kl_drift_table(result), kl_drift_figure(result, drift)


def kl_gradient_scatter(grads: dict) -> plt.Figure:
    """Expected gradient of each estimator used as a loss (y) against the true gradient of the reverse
    KL (x), one point per logit; the forward KL's gradient for comparison."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    x = grads["reverse"]
    lim = float(torch.cat([x, grads["forward"]]).abs().max()) * 1.1
    ax.plot([-lim, lim], [-lim, lim], color="black", lw=0.8, ls=":", label="y = x")
    ax.scatter(x, grads["forward"], s=70, facecolors="none", edgecolors="#9467bd", lw=1.5,
               label=r"$\nabla$ forward KL$(\pi_{\mathrm{ref}}\|\pi)$")
    for kind, marker in (("k1", "s"), ("k2", "o"), ("k3", "x")):
        ax.scatter(x, grads[kind], s=18, marker=marker, color=KL_COLORS[kind], label=f"E[grad {kind}]")
    ax.set_xlabel(r"$\nabla$ reverse KL$(\pi\|\pi_{\mathrm{ref}})$, per logit")
    ax.set_ylabel("expected gradient, per logit")
    ax.legend(fontsize=9, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def adaptive_kl_plot(adaptive, fixed, target_kl: float) -> plt.Figure:
    """beta and the KL over training, adaptive controller vs fixed beta (sim.kl.ControllerRun)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.2, 3.6))
    steps = range(len(adaptive.beta))
    ax1.plot(steps, adaptive.beta.tolist(), color="#d62728", lw=2, label="adaptive")
    ax1.plot(steps, fixed.beta.tolist(), color="gray", lw=2, ls="--", label="fixed")
    ax1.set_ylabel(r"$\beta$")
    ax2.plot(steps, adaptive.kl.tolist(), color="#d62728", lw=2, label="adaptive")
    ax2.plot(steps, fixed.kl.tolist(), color="gray", lw=2, ls="--", label="fixed")
    ax2.axhline(target_kl, color="black", lw=1, ls=":", label=f"target {target_kl:g}")
    ax2.set_ylabel(r"KL$(\pi\|\pi_{\mathrm{ref}})$")
    ax2.set_ylim(0, max(2.2 * target_kl, 1.3 * float(fixed.kl.max())))
    for ax in (ax1, ax2):
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9, loc="upper right")
    fig.tight_layout()
    return fig


def adaptive_kl_view(target_kl: float) -> tuple[str, plt.Figure]:
    """What the chapter-04 controller panel shows (the toy policy of sim.kl.adaptive_kl_run)."""
    from .sim.kl import adaptive_kl_run

    ada = adaptive_kl_run(target_kl)
    fix = adaptive_kl_run(target_kl, adaptive=False)
    tail = slice(-500, None)
    rows = [["adaptive", float(ada.beta[-1]), float(ada.kl[tail].mean()), float(ada.kl[tail].mean()) / target_kl],
            ["fixed", float(fix.beta[-1]), float(fix.kl[tail].mean()), float(fix.kl[tail].mean()) / target_kl]]
    text = table(rows, ["beta", "final beta", "KL, last 500 steps", "KL / target"], ["s", ".4f", ".4f", ".2f"])
    return f"target KL = {target_kl:g}\n" + text, adaptive_kl_plot(ada, fix, target_kl)
