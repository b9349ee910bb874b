"""Chapter 00's figures: the course map, drawn from the judge's catalogue so that it cannot drift."""
from __future__ import annotations

import matplotlib.pyplot as plt


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
    from ..judge.registry import EXERCISES
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
