"""Chapter 13's figures draw what lm.runs computes: each run's half-way steps where they belong, each pass@k
curve at its own k, and TRL's curve under the names TRL logs it."""
import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt      # noqa: E402

from course_lib import plots         # noqa: E402
from course_lib.lm import runs       # noqa: E402


def run(rise_at: dict) -> dict:
    """A 20-step run whose metrics jump at the given steps (the cut share falls, the others rise)."""
    rows = [{"step": 0}]
    for s in range(1, 21):
        rows.append({"step": s, "len/truncated_frac": float(s < rise_at["len/truncated_frac"]),
                     "acc/sampled": float(s >= rise_at["acc/sampled"]),
                     "replies/formatted": float(s >= rise_at["replies/formatted"])})
    return {"rows": rows}


def test_each_run_gets_its_own_three_half_way_steps():
    arms = {"grpo": {0: run({"len/truncated_frac": 6, "acc/sampled": 10, "replies/formatted": 14}),
                     1: run({"len/truncated_frac": 12, "acc/sampled": 8, "replies/formatted": 9})}}
    fig = plots.moves_first_plot(arms)
    lines = fig.axes[0].get_lines()
    for line, (key, _) in zip(lines, plots.real_runs.FIRST):
        want = [runs.half_way_step(r, key) for r in arms["grpo"].values()]
        assert list(line.get_xdata()) == want and list(line.get_ydata()) == [0, 1]
    assert [list(line.get_xdata()) for line in lines][0] != [list(line.get_xdata()) for line in lines][1]
    plt.close(fig)
    arms["grpo"][1]["rows"] = [{**r, "replies/formatted": 0.0} for r in arms["grpo"][1]["rows"]]   # never moves
    fig = plots.moves_first_plot(arms)
    fmt = fig.axes[0].get_lines()[2]
    assert list(fmt.get_xdata()) == [runs.half_way_step(arms["grpo"][0], "replies/formatted")] and list(fmt.get_ydata()) == [0]
    plt.close(fig)


def test_each_pass_at_k_curve_is_drawn_at_its_own_k():
    base = {1: 0.25, 2: 0.45, 4: 0.7, 8: 0.9}
    trained = {"grpo, seed 0": {1: 0.9, 2: 0.95, 4: 0.97}}
    fig = plots.passk_plot(base, trained)
    drawn = [(list(line.get_xdata()), list(line.get_ydata())) for line in fig.axes[0].get_lines()]
    assert drawn == [([1, 2, 4, 8], [0.25, 0.45, 0.7, 0.9]), ([1, 2, 4], [0.9, 0.95, 0.97])]
    plt.close(fig)


def test_trls_curve_is_drawn_from_its_own_names():
    course = {0: {"rows": [{"step": 0}, *({"step": s, "reward/mean": 0.5, "acc/sampled": 0.5, "replies/formatted": 0.0,
                                           "len/all": 30.0, "len/truncated_frac": 0.5,
                                           "groups/zero_signal_frac": 0.25} for s in (1, 2))]}}
    trl = {"rows": [{"step": s, **{name: 0.1 * s for name in runs.TRL_NAMES.values()}} for s in (1, 2)]}
    fig = plots.trl_curve_plot(trl, course)
    trl_line = fig.axes[0].get_lines()[-1]
    assert list(trl_line.get_xdata()) == [1, 2] and list(trl_line.get_ydata()) == pytest.approx([0.1, 0.15])
    plt.close(fig)


def curve_rows(k: int) -> list[dict]:
    return [{"step": 0}, *({"step": s, "reward/mean": 0.1 * s * k, "acc/heldout": 0.5} for s in range(1, 11))]


def curve_arms() -> dict:
    return {"grpo": {s: {"rows": curve_rows(s + 1)} for s in range(3)},
            "token_sum": {s: {"rows": curve_rows(s + 2)} for s in range(3)}}


def inside(legend, ax) -> bool:
    """Whether a legend's box overlaps the axes' plotting area."""
    fig = ax.figure
    fig.canvas.draw()
    return legend.get_window_extent().overlaps(ax.get_window_extent())


def test_the_seeds_of_an_arm_are_told_apart_and_the_legend_covers_no_panel():
    fig = plots.run_curves(curve_arms(), curves=(("reward/mean", "reward"), ("acc/heldout", "held-out")))
    for ax in fig.axes[:2]:
        styles = {}
        for line in ax.get_lines():
            styles.setdefault((line.get_color(), line.get_linewidth()), set()).add(line.get_linestyle())
        assert all(len(s) == 3 for s in styles.values()), styles   # three seeds, three styles, per arm and width
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()][-3:] == ["seed 0", "seed 1", "seed 2"]
    assert not any(inside(legend, ax) for ax in fig.axes if ax.get_visible())
    plt.close(fig)


def test_the_before_after_dots_show_each_seed_and_the_legend_leaves_them_visible():
    task = {"greedy": {"pass@1": 0.25}}
    arms = {"grpo": {s: {"after": {"greedy": {"pass@1": 0.5 + 0.1 * s}}} for s in range(3)}}
    fig = plots.before_after_plot(task, arms, names=("greedy accuracy",))
    ax = fig.axes[0]
    after = [line for line in ax.get_lines() if line.get_color() == plots.real_runs.ARM_COLOURS["grpo"]]
    assert sorted(line.get_marker() for line in after) == sorted(plots.real_runs.SEED_MARKERS)
    assert [float(line.get_ydata()[0]) for line in after] == pytest.approx([0.5, 0.6, 0.7])
    assert not inside(ax.get_legend(), ax)
    plt.close(fig)
