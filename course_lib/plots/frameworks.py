"""Chapter 09's figures: each framework's default normaliser on one batch; the toy trained by TRL."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch

from ..display import table
from .common import bar_offsets, text_and_figure


def normaliser_view(lengths: Sequence[int], *, micro_batches: int = 2, max_len: int | None = None,
                    T: int | None = None) -> tuple[str, plt.Figure]:
    """Each framework's default normaliser on one batch of responses with the given lengths: a table
    of the weight one token of each response gets (and the response's total), and two bar panels."""
    from .. import frameworks as fw
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
    width, offsets = bar_offsets(len(norms))
    cmap = plt.get_cmap("tab10")
    for j, (n, pt, pr) in enumerate(zip(norms, per_tok, per_resp)):
        xs = [i + offsets[j] for i in range(len(lengths))]
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
    return text_and_figure(head, body, fig)


def trl_side_by_side_plot(record, smooth: int = 5) -> plt.Figure:
    """The same run by the course's trainer and by TRL's GRPOTrainer (a ``frameworks.load_trl_run``
    record): the sampled reward per step (a ``smooth``-step running mean) and the greedy held-out
    accuracy, against the RL step."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    for name, style in (("course", "-"), ("TRL", "--")):
        run = record["runs"][name]
        r = torch.tensor(run["reward"])
        k = torch.ones(smooth) / smooth
        mean = torch.nn.functional.conv1d(r.view(1, 1, -1), k.view(1, 1, -1)).view(-1)      # [steps - smooth + 1]
        axes[0].plot(range(smooth, len(r) + 1), mean.tolist(), style, label=name)
        steps, acc = zip(*run["heldout"])
        axes[1].plot(steps, acc, style, marker="o", ms=3, label=name)
    axes[0].set_ylabel(f"sampled reward ({smooth}-step mean)", fontsize=11)
    axes[1].set_ylabel("greedy held-out accuracy", fontsize=11)
    for ax in axes:
        ax.set_xlabel("RL step", fontsize=11)
        ax.tick_params(labelsize=10)
        ax.legend(fontsize=10, frameon=False)
    fig.tight_layout()
    return fig
