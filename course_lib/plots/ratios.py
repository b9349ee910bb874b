"""Chapter 05's figures: the per-token gradient coefficient c(r, A) of every loss, GSPO's whole-response
drop-out against token clipping, and SAPO's soft gate."""
from __future__ import annotations

from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch
import matplotlib.pyplot as plt
import torch

from .. import losses as loss_lib
from .. import ratios as ratio_lib
from ..display import table
from ..masking import masked_mean
from ..sim import ratios as ratio_sim
from .common import BLUE, GREEN, ORANGE, PURPLE, RED, light_grid, zero_line


COEF_RATIOS = (0.5, 0.79, 0.81, 1.0, 1.19, 1.21, 1.27, 1.29, 2.0, 2.9, 3.1, 6.0)
COEF_STYLE = {"PPO/GRPO": dict(color=BLUE, lw=4, alpha=0.45),
              "DAPO": dict(color=RED, lw=2, ls="--"),
              "dual clip": dict(color=PURPLE, lw=2.5, ls=":"),
              "CISPO": dict(color=GREEN, lw=1.8),
              "SAPO": dict(color=ORANGE, lw=1.8, ls="-.")}


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
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.0), layout="constrained")   # the panel fits a laptop's screen
    for ax, sign in zip(axes, (+1, -1)):
        lo, hi = ratio_lib.clip_bounds(eps_low, eps_high)
        ax.axvspan(lo, hi, color="0.92", zorder=0)
        for label, (name, knobs) in specs.items():
            if label == "dual clip" and sign > 0:
                continue
            ax.plot(r, loss_lib.grad_coefficient(name, r, sign, **knobs), label=label,
                    **COEF_STYLE[label])
        zero_line(ax)
        ax.set_title(f"A = {sign:+d}")
        ax.set_xlabel(r"ratio $r = \pi_\theta / \pi_{old}$")
        ax.set_ylabel(r"gradient coefficient $c(r, A)$")
        ax.set_xlim(0, 4)
        light_grid(ax)
    handles, labels = axes[1].get_legend_handles_labels()
    handles.append(Patch(color="0.92", label=f"DAPO's clip range\n[{lo:.2f}, {hi:.2f}]"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=10, frameon=False)   # beside, in view
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
    ax.plot(sig, [r.token_dropped for r in rows], "o-", color=RED, label="tokens dropped, DAPO")
    ax.plot(sig, [r.gspo_seq_dropped for r in rows], "s-", color=BLUE,
            label="responses dropped, GSPO")
    ax.plot(sig, [r.gspo_tok_dropped for r in rows], "s--", color="#17becf",
            label="tokens dropped, GSPO")
    ax.plot(sig, [r.cispo_dropped for r in rows], "^-", color=GREEN, label="tokens dropped, CISPO")
    ax.set_xscale("log")
    ax.set_xlabel(r"token noise $\sigma$ of $\log r$")
    ax.set_ylabel("share")
    ax.set_ylim(-0.02, 0.62)
    light_grid(ax)
    fig.legend(fontsize=10, loc="outside right upper")
    return fig


SAPO_RATIOS = (0.5, 0.8, 1.0, 1.28, 2.0, 3.0, 6.0)


def sapo_gate_view(tau_pos: float = 1.0, tau_neg: float = 1.05) -> tuple[str, plt.Figure]:
    """SAPO's gate weight w(r) = c / (r A) and coefficient c(r, A) for both signs of A, with DAPO's
    hard clip for comparison; a table of both at a few ratios."""
    knobs = dict(tau_pos=tau_pos, tau_neg=tau_neg)
    r = torch.linspace(0.02, 6.0, 600, dtype=torch.float64)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained")
    for sign, color in ((+1, BLUE), (-1, RED)):
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
        zero_line(ax)
        light_grid(ax)
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=10, frameon=False)
    rr = torch.tensor(SAPO_RATIOS, dtype=torch.float64)
    c_pos = loss_lib.grad_coefficient("sapo", rr, 1.0, **knobs)
    c_neg = loss_lib.grad_coefficient("sapo", rr, -1.0, **knobs)
    rows = [[float(rr[i]), float(c_pos[i] / rr[i]), float(-c_neg[i] / rr[i]), float(c_pos[i]),
             float(c_neg[i])] for i in range(len(SAPO_RATIOS))]
    text = table(rows, ["r", "w, A>0", "w, A<0", "c, A=+1", "c, A=-1"],
                 [".2f", ".3f", ".3f", "+.3f", "+.3f"])
    return f"tau_pos = {tau_pos:.2f}, tau_neg = {tau_neg:.2f}\n" + text, fig


# ---- the other ratio-side losses verl 0.9.1 and TRL 1.16.0 select, each beside its parent ----
# panel title -> [(label, registry name, knobs, style)]; the parent first. Clip-Cov and KL-Cov pick
# their tokens from the batch's covariance: the knobs below make every token of the one-token probe
# batch "selected" (or none, kl_coef 0), so the two curves show a selected and an unselected token.
FRAMEWORK_PAIRS = {
    "GSPO -> GMPO": [("GSPO", "gspo", {}, dict(color=BLUE, lw=4, alpha=0.45)),
                     ("GMPO", "gmpo", {}, dict(color=RED, lw=1.8))],
    "CISPO -> VESPO": [("CISPO", "cispo", dict(eps_low=None, eps_high=0.28), dict(color=BLUE, lw=4, alpha=0.45)),
                       ("VESPO", "vespo", {}, dict(color=RED, lw=1.8))],
    "GPG -> DRO": [("GPG", "gpg", {}, dict(color=BLUE, lw=4, alpha=0.45)),
                   ("DRO, beta 1", "dro", dict(beta=1.0), dict(color=RED, lw=1.8))],
    "PPO -> Clip-Cov, KL-Cov": [
        ("PPO", "ppo", {}, dict(color=BLUE, lw=4, alpha=0.45)),
        ("Clip-Cov, selected", "clip_cov", dict(cov_ratio=1.0, cov_lb=-1.0, cov_ub=1.0), dict(color=RED, lw=1.8)),
        ("KL-Cov, not selected", "kl_cov", dict(kl_coef=0.0), dict(color=GREEN, lw=1.8, ls="--")),
        ("KL-Cov, selected", "kl_cov", dict(kl_ratio=1.0), dict(color=ORANGE, lw=1.8, ls=":"))],
}
FRAMEWORK_RATIOS = (0.5, 0.9, 1.0, 1.1, 1.5, 2.0, 3.0)
DPPO_P_OLD = (0.9, 0.5, 0.2)


def framework_coefficient_view() -> tuple[str, plt.Figure]:
    """c(r, A) of GMPO, VESPO, DRO, Clip-Cov and KL-Cov, each on the axes of its parent (one-token
    responses, p_old = 1), for A = +1 (top) and A = -1 (bottom); a table of the same at a few ratios."""
    r = torch.linspace(0.02, 4.0, 800, dtype=torch.float64)
    rt = torch.tensor(FRAMEWORK_RATIOS, dtype=torch.float64)
    fig, axes = plt.subplots(2, len(FRAMEWORK_PAIRS), figsize=(11, 6.2), layout="constrained",
                             sharex=True)
    rows = []
    for j, (title, curves) in enumerate(FRAMEWORK_PAIRS.items()):
        for i, sign in enumerate((+1, -1)):
            ax = axes[i, j]
            for label, name, knobs, style in curves:
                ax.plot(r, loss_lib.grad_coefficient(name, r, sign, **knobs), label=label, **style)
                cs = loss_lib.grad_coefficient(name, rt, sign, **knobs)
                rows.append([label, f"{sign:+d}"] + [float(c) + 0.0 for c in cs])
            zero_line(ax)
            ax.set_xlim(0, 4)
            ax.set_ylim(-3.2, 3.2)
            light_grid(ax)
            if i == 0:
                ax.set_title(title, fontsize=10)
                ax.legend(fontsize=8, loc="upper left", frameon=False)
            else:
                ax.set_xlabel(r"ratio $r$")
            if j == 0:
                ax.set_ylabel(f"c(r, A), A = {sign:+d}")
    text = table(rows, ["loss", "A"] + [f"r={x:g}" for x in FRAMEWORK_RATIOS],
                 ["s", "s"] + ["+.3f"] * len(FRAMEWORK_RATIOS))
    return text, fig


def dppo_coefficient_view(p_olds=DPPO_P_OLD, delta=0.2, trunc=3.0) -> tuple[str, plt.Figure]:
    """DPPO-TV (solid) and DPPO-KL (dashed) c(r, A) against r for a few old probabilities p_old,
    A = +1 and A = -1, with r < 1 / p_old (pi stays a probability); PPO's c for reference. A table
    of the ratio interval each keeps (read off the curves: the first and last r with c != 0)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.3), layout="constrained")
    colors = (BLUE, GREEN, ORANGE, PURPLE)
    rows = []
    for ax, sign in zip(axes, (+1, -1)):
        ax.plot(*_ppo_curve(sign), color="0.6", lw=4, alpha=0.45, label="PPO (any p_old)")
        for p_old, color in zip(p_olds, colors):
            top = min(4.0, (1 - 1e-3) / p_old)
            r = torch.linspace(0.02, top, 800, dtype=torch.float64)
            for name, ls in (("dppo_tv", "-"), ("dppo_kl", "--")):
                c = loss_lib.grad_coefficient(name, r, sign, p_old=p_old, delta_low=delta,
                                              delta_high=delta, trunc=trunc)
                ax.plot(r, c, color=color, ls=ls, lw=1.8,
                        label=f"{name[5:].upper()}, p_old {p_old:g}")
                kept = r[c != 0]
                rows.append([name, f"{sign:+d}", p_old, float(kept.min()), float(kept.max()), top])
        zero_line(ax)
        ax.set_title(f"A = {sign:+d}")
        ax.set_xlabel(r"ratio $r = \pi_\theta / \pi_{old}$")
        ax.set_ylabel(r"gradient coefficient $c(r, A)$")
        ax.set_xlim(0, 4)
        light_grid(ax)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(f"DPPO trust region delta {delta:g}, weight capped at {trunc:g}", fontsize=10)
    text = table(rows, ["loss", "A", "p_old", "c != 0 from r", "to r", "plotted to"],
                 ["s", "s", ".1f", ".3f", ".3f", ".3f"])
    return text, fig


def _ppo_curve(sign):
    r = torch.linspace(0.02, 4.0, 800, dtype=torch.float64)
    return r, loss_lib.grad_coefficient("ppo", r, sign)
