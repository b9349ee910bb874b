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


# ---- chapter 00 ----
# The parts of a GRPO-family loss: (name, symbol, chapters that measure it, chapters whose exercises
# practise it). The exercise ids themselves come from the judge's catalogue.
COURSE_PARTS = [
    ("advantage", r"$\hat A_i$", ("01", "02"), ("01", "02")),
    ("ratio and clip", r"$f(r_{i,t},\hat A_i)$", ("05", "01"), ("05",)),
    ("mismatch weight", r"$w_{i,t}$", ("06",), ("06",)),
    ("aggregation", r"$\alpha_{i,t}$", ("03",), ("03",)),
    ("KL penalty", r"$\beta\,\widehat{\mathrm{KL}}$", ("04",), ("04",)),
    ("all of it, trained", "a toy model", ("07",), ()),
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
