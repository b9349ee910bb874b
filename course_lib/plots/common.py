"""What several chapters' figures draw with: the palette, the zero line, the light grid, grouped bars,
and the (text, figure) pair a slider panel shows. Presentation only."""
from __future__ import annotations

import matplotlib.pyplot as plt

# matplotlib's first colours, named so that a method keeps its colour across figures
BLUE, ORANGE, GREEN, RED, PURPLE, GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#7f7f7f"


def zero_line(ax: plt.Axes, lw: float = 0.8) -> None:
    """A thin black horizontal line at y = 0."""
    ax.axhline(0, color="black", lw=lw)


def light_grid(ax: plt.Axes, **kwargs) -> None:
    """The faint grid every chapter's plots use (``axis="y"`` for bar charts)."""
    ax.grid(alpha=0.3, **kwargs)


def bar_offsets(n_series: int, total_width: float = 0.8) -> tuple[float, list[float]]:
    """Width of one bar and each series' offset from the group's centre, for n_series bars side by side."""
    width = total_width / n_series
    return width, [(j - (n_series - 1) / 2) * width for j in range(n_series)]


def text_and_figure(head: str, body: str, fig: plt.Figure) -> tuple[str, plt.Figure]:
    """What a panel shows: a heading line, a table under it, and the figure."""
    return head + "\n" + body, fig


def title_and_legend_on_top(fig, title: str, handles: list, labels: list) -> None:
    """Lay the panels out below half an inch left for the title and, under it, the figure's legend on one
    row (a figure's legend stays out of tight_layout's room for the panels, so it covers none of them)."""
    h = fig.get_figheight()
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / h))
    fig.suptitle(title, fontsize=10, y=1.0)
    fig.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.28 / h),
               ncol=len(handles), frameon=False)


def finish_step_panels(axes, titles) -> None:
    """Panels of curves over RL steps, one per title in order: each titled, small ticks and a light grid; the
    panels left over hidden, the bottom row's x axis labelled "RL step"."""
    titles = list(titles)
    for ax, title in zip(axes.flat, titles):
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        light_grid(ax)
    for ax in axes.flat[len(titles):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("RL step", fontsize=8)
