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


# ---- chapter 01 ----

def _clip_regions(eps_low: float, eps_high: float, dual_clip: float | None) -> list[tuple[float, str, float]]:
    """(A, region name, representative ratio) for the six cases, plus A<0 beyond the dual clip."""
    from .ratios import clip_bounds
    lo, hi = clip_bounds(eps_low, eps_high)
    cases = []
    for A in (1.0, -1.0):
        cases += [(A, "r < 1-eps_low", 0.75 * lo), (A, "inside", 1.0), (A, "r > 1+eps_high", hi + 0.2)]
    if dual_clip is not None:
        cases.append((-1.0, "r > dual clip c", dual_clip + 0.5))
    return cases


def clip_cases_view(eps_low: float = 0.2, eps_high: float = 0.2,
                    dual_clip: float | None = 3.0) -> tuple[str, plt.Figure]:
    """PPO's clipped objective J(r) and its gradient coefficient c(r, A) for A = +1 and A = -1.

    The table evaluates the six cases (sign of A x ratio below / inside / above the clip range, and
    A < 0 beyond the dual clip when it is on) at one ratio each; the figure shades where c = 0.
    Every number comes from ``ratios.clipped_surrogate`` and ``losses.grad_coefficient`` (autograd).
    """
    from .losses import grad_coefficient
    from .ratios import clip_bounds, clipped_surrogate

    def objective(r: torch.Tensor, A: float) -> torch.Tensor:     # paper's J = -loss
        return -clipped_surrogate(r, torch.full_like(r, A), eps_low, eps_high, dual_clip)

    knobs = dict(eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip)
    rows = []
    for A, region, r in _clip_regions(eps_low, eps_high, dual_clip):
        rt = torch.tensor([r], dtype=torch.float64)
        c = float(grad_coefficient("ppo", rt, A, **knobs)[0]) + 0.0     # no "-0.000"
        rows.append([f"{A:+.0f}", region, r, float(objective(rt, A)[0]), c,
                     "flows" if c != 0 else "stopped"])
    lo, hi = clip_bounds(eps_low, eps_high)
    dual = "off" if dual_clip is None else f"c = {dual_clip:.2f}"
    head = (f"clip range [{lo:.2f}, {hi:.2f}]   dual clip: {dual}   "
            f"(J = min(rA, clip(r)A), c = gradient coefficient)")
    body = table(rows, ["A", "ratio region", "r", "J(r)", "c(r, A)", "gradient"],
                 ["s", "s", ".3f", "+.3f", "+.3f", "s"])

    r_max = 3.0 if dual_clip is None else dual_clip + 1.0
    r = torch.linspace(0.02, r_max, 300, dtype=torch.float64)
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for j, A in enumerate((1.0, -1.0)):
        c = grad_coefficient("ppo", r, A, **knobs)
        curves = ((objective(r, A), "objective J(r)"), (c, "gradient coefficient c(r, A)"))
        for i, (y, label) in enumerate(curves):
            ax = axes[i, j]
            ax.plot(r, r * A, color="0.6", ls="--", lw=1, label="unclipped: rA")
            ax.plot(r, y, color="#1f77b4", lw=2, label=label)
            ax.fill_between(r, 0, 1, where=(c == 0).tolist(), color="#d62728", alpha=0.12,
                            transform=ax.get_xaxis_transform(), label="no gradient")
            ax.axvline(lo, color="0.3", lw=0.8, ls=":")
            ax.axvline(hi, color="0.3", lw=0.8, ls=":")
            ax.axhline(0, color="black", lw=0.6)
            ax.legend(fontsize=9, loc="upper left" if A > 0 else "lower left")
            ax.grid(alpha=0.3)
        axes[0, j].set_title(f"A = {A:+.0f}")
        axes[1, j].set_xlabel("ratio r = π_θ / π_old")
    axes[0, 0].set_ylabel("objective J(r)")
    axes[1, 0].set_ylabel("gradient coefficient c")
    # fixed margins: tight_layout costs more than the rest of the panel's redraw
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.09, top=0.94, wspace=0.15, hspace=0.08)
    return head + "\n" + body, fig


def gae_view(gamma: float = 1.0, lam: float = 0.95) -> tuple[str, plt.Figure]:
    """GAE on the chapter's two-response example: per-token advantages, raw and verl-whitened.

    Numbers from ``advantages.gae`` and ``sim.ppo.masked_whiten``; the bars show both.
    """
    from .sim.ppo import gae_example, masked_whiten
    ex = gae_example()
    mask = ex["mask"]
    adv, returns = adv_lib.gae(ex["rewards"], ex["values"], mask, gamma=gamma, lam=lam)
    white = masked_whiten(adv, mask)
    rows = []
    for i in range(mask.shape[0]):
        for t in range(int(mask[i].sum())):
            rows.append([i, t, float(ex["rewards"][i, t]), float(ex["values"][i, t]),
                         float(adv[i, t]), float(returns[i, t]), float(white[i, t])])
    head = f"gamma = {gamma:.2f}   lambda = {lam:.2f}   (response 0 right, reward 1; response 1 wrong, 0)"
    body = table(rows, ["resp", "t", "reward", "V", "A (raw)", "return", "A (whitened)"],
                 ["d", "d", ".0f", ".2f", "+.4f", ".4f", "+.4f"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
    for ax, (y, title) in zip(axes, ((adv, "raw GAE (course_lib.advantages.gae)"),
                                     (white, "whitened over the batch (verl)"))):
        for i, color in ((0, "#2ca02c"), (1, "#d62728")):
            n = int(mask[i].sum())
            ax.bar([x + 0.4 * i for x in range(n)], y[i, :n].tolist(), 0.4, color=color,
                   label=f"response {i} ({'right' if i == 0 else 'wrong'})")
        ax.axhline(0, color="black", lw=0.6)
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("token position t")
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("advantage A_t")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=2, fontsize=10)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.80, wspace=0.06)   # legend above the bars
    return head + "\n" + body, fig


def clip_epochs_plot(logs: dict[int, dict]) -> plt.Figure:
    """Binding clip fraction and largest ratio against the update index on one batch, per seed."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    for seed, log in logs.items():
        x = [u + 1 for u in log["update"]]
        ax1.plot(x, log["binding_frac"], "o-", ms=4, label=f"seed {seed}")
        ax2.plot(x, log["ratio_max"], "o-", ms=4, label=f"seed {seed}")
    ax1.set_ylabel("binding clip fraction")
    ax2.set_ylabel("largest ratio r in the batch")
    for ax in (ax1, ax2):
        ax.set_xlabel("gradient update on the same batch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def loss_and_reward_plot(log: dict) -> plt.Figure:
    """What a GRPO run logs with one update per batch: the loss, its two parts, and the reward."""
    x = [b + 1 for b in log["batch"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    ax1.plot(x, log["loss"], "o-", ms=3, label="logged loss (policy + β·KL)")
    ax1.plot(x, log["pg_loss"], "s-", ms=3, label="policy-gradient part")
    ax1.set_ylabel("loss")
    ax1.legend(fontsize=9, loc="upper left")
    ax2.plot(x, log["reward"], "o-", ms=3, color="#2ca02c", label="mean reward of the batch")
    ax2.set_ylabel("mean reward")
    ax2.legend(fontsize=9, loc="upper left")
    for ax in (ax1, ax2):
        ax.set_xlabel("batch (one gradient update each)")
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


# ---- chapter 00 ----
# The parts of a GRPO-family loss: (name, symbol, chapters that measure it, chapters whose exercises
# practise it). The exercise ids themselves come from the judge's catalogue.
COURSE_PARTS = [
    ("advantage", r"$\hat A_i$", ("01", "02"), ("01", "02")),
    ("ratio and clip", r"$f(r_{i,t},\hat A_i)$", ("05", "01"), ("05",)),
    ("mismatch weight", r"$w_{i,t}$", ("06",), ("06",)),
    ("aggregation", r"$\alpha_{i,t}$", ("03",), ("03",)),
    ("KL penalty", r"$\beta\,\widehat{\mathrm{KL}}$", ("04",), ("04",)),
    ("all of it, trained", "a toy model", ("07", "08"), ("08",)),
]


def exercises_by_chapter() -> dict[str, list[str]]:
    """{chapter number "NN": ["exNN", ...]} from the judge's catalogue, so the map cannot drift."""
    from .judge.registry import EXERCISES
    out: dict[str, list[str]] = {}
    for ex in EXERCISES.values():
        out.setdefault(ex.chapter[:2], []).append(ex.id[:4])
    return {k: sorted(v) for k, v in out.items()}


def course_map() -> plt.Figure:
    """One figure: the loss's parts left to right, each with its chapters and exercises."""
    from matplotlib.patches import FancyBboxPatch
    exercises = exercises_by_chapter()
    fig, ax = plt.subplots(figsize=(12, 3.3))
    ax.set_xlim(0, len(COURSE_PARTS))
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.set_title(r"$\mathcal{L}(\theta) = -\sum_{i,t}\ \alpha_{i,t}\ w_{i,t}\ "
                 r"f(r_{i,t}(\theta), \hat A_i) + \beta\,\widehat{\mathrm{KL}}"
                 r"(\pi_\theta\,\|\,\pi_{\mathrm{ref}})$", fontsize=15, pad=12)
    colors = ["#dbe9f6", "#fde2c8", "#e2f0d9", "#ece2f0", "#fbe3e3", "#eeeeee"]
    for j, (part, symbol, chapters, ex_chapters) in enumerate(COURSE_PARTS):
        ax.add_patch(FancyBboxPatch((j + 0.05, 0.03), 0.9, 0.92, boxstyle="round,pad=0.02",
                                    fc=colors[j], ec="#555555"))
        ax.text(j + 0.5, 0.84, part, ha="center", va="center", fontsize=12, weight="bold")
        ax.text(j + 0.5, 0.64, symbol, ha="center", va="center", fontsize=14)
        ax.text(j + 0.5, 0.43, "chapter " + ", ".join(chapters), ha="center", va="center", fontsize=11)
        exs = sorted(e for c in ex_chapters for e in exercises.get(c, []))
        lines = [" ".join(exs[k:k + 3]) for k in range(0, len(exs), 3)] or ["no exercise"]
        ax.text(j + 0.5, 0.2, "\n".join(lines), ha="center", va="center", fontsize=10, color="#333333")
    fig.tight_layout()
    return fig


# ---- chapter 05 ----
from matplotlib.colors import ListedColormap          # noqa: E402
from matplotlib.patches import Patch                  # noqa: E402

from . import losses as loss_lib                      # noqa: E402
from . import ratios as ratio_lib                     # noqa: E402
from .masking import masked_mean                      # noqa: E402
from .sim import ratios as ratio_sim                  # noqa: E402

COEF_RATIOS = (0.5, 0.79, 0.81, 1.0, 1.19, 1.21, 1.27, 1.29, 2.0, 2.9, 3.1, 6.0)
COEF_STYLE = {"PPO/GRPO": dict(color="#1f77b4", lw=4, alpha=0.45),
              "DAPO": dict(color="#d62728", lw=2, ls="--"),
              "dual clip": dict(color="#9467bd", lw=2.5, ls=":"),
              "CISPO": dict(color="#2ca02c", lw=1.8),
              "SAPO": dict(color="#ff7f0e", lw=1.8, ls="-.")}


def coefficient_specs(eps_low=0.2, eps_high=0.28, dual_clip=3.0, tau_pos=1.0, tau_neg=1.05):
    """label -> (registry name, knobs): the five curves of the gradient-coefficient plot."""
    return {"PPO/GRPO": ("ppo", dict(eps_low=eps_low, eps_high=eps_low)),
            "DAPO": ("dapo", dict(eps_low=eps_low, eps_high=eps_high)),
            "dual clip": ("dapo", dict(eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip)),
            "CISPO": ("cispo", dict(eps_low=None, eps_high=eps_high)),
            "SAPO": ("sapo", dict(tau_pos=tau_pos, tau_neg=tau_neg))}


def coefficient_table(specs, ratios=COEF_RATIOS) -> str:
    """c(r, A) at a few ratios for A = +1 and A = -1, each from ``losses.grad_coefficient``."""
    r = torch.tensor(ratios, dtype=torch.float64)
    cols, heads = [], []
    for sign in (+1, -1):
        for label, (name, knobs) in specs.items():
            if label == "dual clip" and sign > 0:         # dual clip acts on A < 0 only
                continue
            cols.append(loss_lib.grad_coefficient(name, r, sign, **knobs))
            heads.append(f"{label.split('/')[0].split()[0]}{'+' if sign > 0 else '-'}")
    rows = [[float(r[i])] + [float(c[i]) + 0.0 for c in cols] for i in range(len(ratios))]   # no -0.000
    return table(rows, ["r"] + heads, [".2f"] + ["+.3f"] * len(cols))


def grad_coefficient_view(eps_low=0.2, eps_high=0.28, dual_clip=3.0, tau_pos=1.0,
                          tau_neg=1.05) -> tuple[str, plt.Figure]:
    """Per-token gradient coefficient c(r, A) of PPO/GRPO, DAPO, dual clip, CISPO and SAPO against
    the ratio r, for A = +1 and A = -1 (fact sheet §7); a table of the same at a few ratios."""
    specs = coefficient_specs(eps_low, eps_high, dual_clip, tau_pos, tau_neg)
    r = torch.linspace(0.02, 4.0, 800, dtype=torch.float64)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.3), layout="constrained")
    for ax, sign in zip(axes, (+1, -1)):
        lo, hi = ratio_lib.clip_bounds(eps_low, eps_high)
        ax.axvspan(lo, hi, color="0.92", zorder=0)
        for label, (name, knobs) in specs.items():
            if label == "dual clip" and sign > 0:
                continue
            ax.plot(r, loss_lib.grad_coefficient(name, r, sign, **knobs), label=label,
                    **COEF_STYLE[label])
        ax.axhline(0, color="black", lw=0.8)
        ax.set_title(f"A = {sign:+d}")
        ax.set_xlabel(r"ratio $r = \pi_\theta / \pi_{old}$")
        ax.set_ylabel(r"gradient coefficient $c(r, A)$")
        ax.set_xlim(0, 4)
        ax.grid(alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize=10, frameon=False)
    fig.suptitle(f"eps_low {eps_low:.2f}, eps_high {eps_high:.2f}, dual clip c {dual_clip:.2f}, "
                 f"SAPO tau_pos {tau_pos:.2f}, tau_neg {tau_neg:.2f}  (grey: DAPO's clip range)",
                 fontsize=10)
    return coefficient_table(specs), fig


def gspo_dropout_view(sigma: float = 0.2, n: int = 8, min_len: int = 24, max_len: int = 40,
                      seed: int = 0) -> plt.Figure:
    """Which tokens of a small simulated batch get a gradient: token-level clipping (DAPO) leaves
    scattered holes, GSPO's sequence-level clip removes whole responses."""
    z, mask, adv = ratio_sim.simulated_batch(n, min_len, max_len, seed)
    logp, old_logp = sigma * z, torch.zeros_like(z)
    s = masked_mean(ratio_lib.log_ratio(logp, old_logp, mask), mask, dim=-1).exp()    # [n]
    cmap = ListedColormap(["#e6e6e6", "black", "#f28e2b", "#4c9be8"])
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.6), layout="constrained")
    for ax, (title, name, knobs) in zip(axes, (
            ("DAPO: token-level clip [0.8, 1.28]", "dapo", {}),
            ("GSPO: sequence-level clip [1 - 3e-4, 1 + 4e-4]", "gspo", {}))):
        grad = ratio_sim.token_gradients(name, logp, old_logp, adv, mask, **knobs)     # [n, T]
        code = torch.where(grad != 0, torch.where(adv[:, None] > 0, 3, 2), 1)
        code = torch.where(mask, code, 0)
        ax.imshow(code.numpy(), cmap=cmap, vmin=0, vmax=3, aspect="auto", interpolation="nearest")
        ax.set_yticks(range(n), [f"A={float(a):+.0f}" for a in adv])
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("token position")
        if name == "gspo":
            for i in range(n):
                ax.text(max_len - 0.4, i, f" s={float(s[i]):.4f}", va="center", fontsize=10)
    handles = [Patch(color="#4c9be8", label="gradient, A > 0"), Patch(color="#f28e2b", label="gradient, A < 0"),
               Patch(color="black", label="no gradient (clipped)"), Patch(color="#e6e6e6", label="padding")]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=10, frameon=False)
    return fig


def clipping_vs_noise_plot(rows) -> plt.Figure:
    """Shares of tokens / responses that lose their gradient against the token noise sigma."""
    sig = [r.sigma for r in rows]
    fig, ax = plt.subplots(figsize=(10, 4), layout="constrained")
    ax.plot(sig, [r.token_outside for r in rows], "o:", color="0.4", label="tokens outside [0.8, 1.28]")
    ax.plot(sig, [r.token_dropped for r in rows], "o-", color="#d62728", label="tokens dropped, DAPO")
    ax.plot(sig, [r.gspo_seq_dropped for r in rows], "s-", color="#1f77b4",
            label="responses dropped, GSPO")
    ax.plot(sig, [r.gspo_tok_dropped for r in rows], "s--", color="#17becf",
            label="tokens dropped, GSPO")
    ax.plot(sig, [r.cispo_dropped for r in rows], "^-", color="#2ca02c", label="tokens dropped, CISPO")
    ax.set_xscale("log")
    ax.set_xlabel(r"token noise $\sigma$ of $\log r$")
    ax.set_ylabel("share")
    ax.set_ylim(-0.02, 0.62)
    ax.grid(alpha=0.3)
    fig.legend(fontsize=10, loc="outside right upper")
    return fig


SAPO_RATIOS = (0.5, 0.8, 1.0, 1.28, 2.0, 3.0, 6.0)


def sapo_gate_view(tau_pos: float = 1.0, tau_neg: float = 1.05) -> tuple[str, plt.Figure]:
    """SAPO's gate weight w(r) = c / (r A) and coefficient c(r, A) for both signs of A, with DAPO's
    hard clip for comparison; a table of both at a few ratios."""
    knobs = dict(tau_pos=tau_pos, tau_neg=tau_neg)
    r = torch.linspace(0.02, 6.0, 600, dtype=torch.float64)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for sign, color in ((+1, "#1f77b4"), (-1, "#d62728")):
        tau = tau_pos if sign > 0 else tau_neg
        c = loss_lib.grad_coefficient("sapo", r, sign, **knobs)
        dapo = loss_lib.grad_coefficient("dapo", r, sign)
        for ax, y_sapo, y_dapo in ((ax1, c / (r * sign), dapo / (r * sign)), (ax2, c, dapo)):
            ax.plot(r, y_sapo, color=color, label=f"SAPO, A = {sign:+d} (tau {tau:.2f})")
            ax.plot(r, y_dapo, color=color, ls=":", lw=1.5, label=f"DAPO clip, A = {sign:+d}")
    ax1.set_ylabel(r"weight $w(r) = c / (r A)$")
    ax2.set_ylabel(r"gradient coefficient $c(r, A)$")
    for ax in (ax1, ax2):
        ax.set_xlabel(r"ratio $r$")
        ax.axhline(0, color="black", lw=0.8)
        ax.grid(alpha=0.3)
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=10, frameon=False)
    rr = torch.tensor(SAPO_RATIOS, dtype=torch.float64)
    c_pos = loss_lib.grad_coefficient("sapo", rr, 1.0, **knobs)
    c_neg = loss_lib.grad_coefficient("sapo", rr, -1.0, **knobs)
    rows = [[float(rr[i]), float(c_pos[i] / rr[i]), float(-c_neg[i] / rr[i]), float(c_pos[i]),
             float(c_neg[i])] for i in range(len(SAPO_RATIOS))]
    text = table(rows, ["r", "w, A>0", "w, A<0", "c, A=+1", "c, A=-1"],
                 [".2f", ".3f", ".3f", "+.3f", "+.3f"])
    return f"tau_pos = {tau_pos:.2f}, tau_neg = {tau_neg:.2f}\n" + text, fig


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


# ---- chapter 09 ----
def normaliser_view(lengths: Sequence[int], *, micro_batches: int = 2, max_len: int | None = None,
                    T: int | None = None) -> tuple[str, plt.Figure]:
    """Each framework's default normaliser on one batch of responses with the given lengths: a table
    of the weight one token of each response gets (and the response's total), and two bar panels."""
    from . import frameworks as fw
    T = T or max(lengths)
    mask = torch.arange(T)[None, :] < torch.tensor(list(lengths))[:, None]              # [B, T]
    norms = fw.NORMALISERS
    per_tok, per_resp = [], []
    for n in norms:
        w = fw.normaliser_weights(n, mask, micro_batches=micro_batches, max_len=max_len)   # [B, T]
        per_tok.append([float(w[i].max()) for i in range(len(lengths))])
        per_resp.append([float(w[i].sum()) for i in range(len(lengths))])
    head = (f"lengths {list(lengths)}; {micro_batches} micro-batch(es); L_max {max_len or T}. "
            f"Weight of one token x 1000 [response total]")
    rows = [[n.label] + [f"{1e3 * a:.2f} [{b:.3f}]" for a, b in zip(pt, pr)] + [f"{sum(pr):.3f}"]
            for n, pt, pr in zip(norms, per_tok, per_resp)]
    body = table(rows, ["normaliser"] + [f"y{i} ({n})" for i, n in enumerate(lengths)] + ["sum"],
                 ["s"] * (len(lengths) + 2))
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    width = 0.8 / len(norms)
    cmap = plt.get_cmap("tab10")
    for j, (n, pt, pr) in enumerate(zip(norms, per_tok, per_resp)):
        xs = [i + (j - (len(norms) - 1) / 2) * width for i in range(len(lengths))]
        axes[0].bar(xs, pt, width, color=cmap(j), label=n.label)
        axes[1].bar(xs, pr, width, color=cmap(j))
    ticks = [f"y{i}\n{n} tokens" for i, n in enumerate(lengths)]
    for ax, ylabel in zip(axes, ["weight of one token", "total weight of the response"]):
        ax.set_xticks(range(len(lengths)), ticks, fontsize=10)
        ax.set_ylabel(ylabel, fontsize=11)
        ax.tick_params(labelsize=10)
    axes[0].set_title("per token", fontsize=11)
    axes[1].set_title("per response", fontsize=11)
    fig.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=10, frameon=False)
    fig.tight_layout()
    return head + "\n" + body, fig
