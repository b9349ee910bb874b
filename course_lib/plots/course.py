"""Chapter 00's figures: the course map and each chapter's exercises, drawn from the judge's catalogue so
that they cannot drift."""
from __future__ import annotations

import matplotlib.pyplot as plt


# The parts of a GRPO-family loss: (name, symbol, chapters that measure it). Which exercises practise
# each part comes from the judge's catalogue (each exercise names its part).
COURSE_PARTS = [
    ("advantage", r"$\hat A_i$", ("01", "02")),
    ("ratio and clip", r"$f(r_{i,t},\hat A_i)$", ("05", "01", "12", "14")),
    ("mismatch weight", r"$w_{i,t}$", ("06", "12")),
    ("aggregation", r"$\alpha_{i,t}$", ("03", "10")),
    ("KL penalty", r"$\beta\,\widehat{\mathrm{KL}}$", ("04", "12")),
    ("all of it, trained", "a toy model,\na real one", ("07", "08", "11", "13", "14", "15")),
    ("in production", "verl, TRL,\nOpenRLHF", ("09",)),
]


def exercises_by_chapter() -> dict[str, list[str]]:
    """{chapter number "NN": ["exNN", ...]}: the exercises each chapter teaches, from the judge's catalogue."""
    from ..judge.registry import EXERCISES
    out: dict[str, list[str]] = {}
    for ex in EXERCISES.values():
        out.setdefault(ex.chapter[:2], []).append(ex.id[:4])
    return {k: sorted(v) for k, v in out.items()}


def exercises_by_part() -> dict[str, list[str]]:
    """{part of the loss: ["exNN", ...]} from the judge's catalogue."""
    from ..judge.registry import EXERCISES
    out: dict[str, list[str]] = {part: [] for part, _, _ in COURSE_PARTS}
    for ex in EXERCISES.values():
        out[ex.part].append(ex.id[:4])
    return {k: sorted(v) for k, v in out.items()}


def chapter_exercises(chapter: str) -> str:
    """One chapter's exercises as the README and chapter 00 list them, from the judge's catalogue:
    "ex05, ex10", "none of its own; uses ex03, ex05", or "none"."""
    from ..judge.registry import EXERCISES
    own = exercises_by_chapter().get(chapter[:2], [])
    used = sorted(ex.id[:4] for ex in EXERCISES.values() if chapter[:2] in ex.uses)
    if not used:
        return ", ".join(own) or "none"
    return (", ".join(own) + "; also " if own else "none of its own; uses ") + ", ".join(used)


def course_map() -> plt.Figure:
    """One figure: the loss's parts left to right, each with its chapters and exercises."""
    from matplotlib.patches import FancyBboxPatch
    exercises = exercises_by_part()
    fig, ax = plt.subplots(figsize=(12, 3.3))
    ax.set_xlim(0, len(COURSE_PARTS))
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.set_title(r"$\mathcal{L}(\theta) = -\sum_{i,t}\ \alpha_{i,t}\ w_{i,t}\ "
                 r"f(r_{i,t}(\theta), \hat A_i) + \beta\,\widehat{\mathrm{KL}}"
                 r"(\pi_\theta\,\|\,\pi_{\mathrm{ref}})$", fontsize=15, pad=12)
    colors = ["#dbe9f6", "#fde2c8", "#e2f0d9", "#ece2f0", "#fbe3e3", "#eeeeee", "#fff5cc"]
    for j, (part, symbol, chapters) in enumerate(COURSE_PARTS):
        ax.add_patch(FancyBboxPatch((j + 0.05, 0.03), 0.9, 0.92, boxstyle="round,pad=0.02",
                                    fc=colors[j], ec="#555555"))
        ax.text(j + 0.5, 0.84, part, ha="center", va="center", fontsize=11, weight="bold")
        ax.text(j + 0.5, 0.64, symbol, ha="center", va="center", fontsize=14)
        listed = ", ".join(chapters) if len(chapters) <= 3 else (", ".join(chapters[:2]) + ",\n"
                                                                 + ", ".join(chapters[2:]))
        ax.text(j + 0.5, 0.43, "chapter " + listed, ha="center", va="center", fontsize=11)
        exs = exercises[part]
        lines = [" ".join(exs[k:k + 3]) for k in range(0, len(exs), 3)] or ["no exercise"]
        ax.text(j + 0.5, 0.2, "\n".join(lines), ha="center", va="center", fontsize=10, color="#333333")
    fig.tight_layout()
    return fig
