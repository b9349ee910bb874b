"""Chapter 01's figures: PPO's clipped objective case by case, GAE (raw and whitened), and what one or
several updates per batch log."""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from .. import advantages as adv_lib
from ..display import table
from .common import BLUE, GREEN, RED, light_grid, text_and_figure, zero_line


def _clip_regions(eps_low: float, eps_high: float, dual_clip: float | None) -> list[tuple[float, str, float]]:
    """(A, region name, representative ratio) for the six cases, plus A<0 beyond the dual clip."""
    from ..ratios import clip_bounds
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
    from ..losses import grad_coefficient
    from ..ratios import clip_bounds, clipped_surrogate

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
            ax.plot(r, y, color=BLUE, lw=2, label=label)
            ax.fill_between(r, 0, 1, where=(c == 0).tolist(), color=RED, alpha=0.12,
                            transform=ax.get_xaxis_transform(), label="no gradient")
            ax.axvline(lo, color="0.3", lw=0.8, ls=":")
            ax.axvline(hi, color="0.3", lw=0.8, ls=":")
            zero_line(ax, lw=0.6)
            ax.legend(fontsize=9, loc="upper left" if A > 0 else "lower left")
            light_grid(ax)
        axes[0, j].set_title(f"A = {A:+.0f}")
        axes[1, j].set_xlabel("ratio r = π_θ / π_old")
    axes[0, 0].set_ylabel("objective J(r)")
    axes[1, 0].set_ylabel("gradient coefficient c")
    # fixed margins: tight_layout costs more than the rest of the panel's redraw
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.09, top=0.94, wspace=0.15, hspace=0.08)
    return text_and_figure(head, body, fig)


def gae_view(gamma: float = 1.0, lam: float = 0.95) -> tuple[str, plt.Figure]:
    """GAE on the chapter's two-response example: per-token advantages, raw and verl-whitened.

    Numbers from ``advantages.gae`` and ``sim.ppo.masked_whiten``; the bars show both.
    """
    from ..sim.ppo import gae_example, masked_whiten
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
        for i, color in ((0, GREEN), (1, RED)):
            n = int(mask[i].sum())
            ax.bar([x + 0.4 * i for x in range(n)], y[i, :n].tolist(), 0.4, color=color,
                   label=f"response {i} ({'right' if i == 0 else 'wrong'})")
        zero_line(ax, lw=0.6)
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("token position t")
        light_grid(ax, axis="y")
    axes[0].set_ylabel("advantage A_t")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=2, fontsize=10)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.80, wspace=0.06)   # legend above the bars
    return text_and_figure(head, body, fig)


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
        light_grid(ax)
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
    ax2.plot(x, log["reward"], "o-", ms=3, color=GREEN, label="mean reward of the batch")
    ax2.set_ylabel("mean reward")
    ax2.legend(fontsize=9, loc="upper left")
    for ax in (ax1, ax2):
        ax.set_xlabel("batch (one gradient update each)")
        light_grid(ax)
    fig.tight_layout()
    return fig
