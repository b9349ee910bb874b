"""Chapters 14 and 15's figures draw what lm.lineage and lm.sweep compute: each arm's band from its lowest
to its highest seed around the seeds' mean, what each loss's clip removes on the panel of its unit, and a
learning-rate sweep with each setting's good band."""
import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt      # noqa: E402

from course_lib import plots         # noqa: E402


def run(values: dict, loss: str = "grpo") -> dict:
    n = len(next(iter(values.values())))
    rows = [{"step": 0}] + [{"step": i + 1, **{k: v[i] for k, v in values.items()}} for i in range(n)]
    return {"rows": rows, "config": {"loss": loss}}


def test_each_arm_is_its_seeds_mean_inside_their_band():
    arms = {"grpo": {0: run({"x": [1.0, 2.0, 3.0]}), 1: run({"x": [3.0, 2.0, 1.0]})},
            "dapo": {0: run({"x": [5.0, 5.0, 5.0]})}}
    fig = plots.band_curves(arms, (("x", "x"),), title="t", width=1)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [list(line.get_ydata()) for line in lines] == [[2.0, 2.0, 2.0], [5.0, 5.0, 5.0]]
    assert [line.get_label() for line in lines] == ["GRPO (2 seeds)", "DAPO (1 seed)"]
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(1.0) and band.max() == pytest.approx(3.0)
    plt.close(fig)
    fig = plots.band_curves({"mine": arms["dapo"]}, (("x", "x"),), title="t", labels={"mine": "my arm"},
                            colours={"mine": "#123456"})
    (line,) = fig.axes[0].get_lines()
    assert line.get_label() == "my arm (1 seed)" and line.get_color() == "#123456"
    plt.close(fig)


def test_the_removed_share_goes_to_its_units_panel_and_none_for_cispo():
    clip = {"clip/low_frac": [0.1, 0.1], "clip/high_frac": [0.1, 0.3], "clip_seq/low_frac": [0.5, 0.5],
            "clip_seq/high_frac": [0.0, 0.0], "ratio/mean": [1.0, 1.0]}
    arms = {"dapo": {0: run(clip, "dapo")}, "gspo": {0: run(clip, "gspo")}, "cispo": {0: run(clip, "cispo")}}
    fig = plots.removed_plot(arms, width=1)
    tok, rep = fig.axes[:2]
    assert [list(line.get_ydata()) for line in tok.get_lines()] == [pytest.approx([0.2, 0.4]), [0.0, 0.0]]
    assert [list(line.get_ydata()) for line in rep.get_lines()] == [[0.5, 0.5]]
    plt.close(fig)


def test_the_sweep_draws_each_settings_mean_its_seeds_and_its_good_band():
    sweeps = {"full": {1e-5: {0: 0.5}, 2e-5: {0: 0.9, 1: 0.8}, 5e-5: {0: 0.82}},
              "rank 1": {2e-5: {0: 0.2}, 2e-4: {0: 0.9}}}
    fig = plots.sweep_plot(sweeps, ylabel="y", title="t")
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["full (mean of the seeds)"].get_ydata()) == pytest.approx([0.5, 0.85, 0.82])
    assert list(lines["full: as good as its best"].get_xdata()) == [2e-5, 5e-5]
    assert list(lines["rank 1: as good as its best"].get_xdata()) == [2e-4, 2e-4]
    dots = sorted(v for c in ax.collections for v in c.get_offsets()[:, 1])
    assert dots == pytest.approx(sorted([0.5, 0.9, 0.8, 0.82, 0.2, 0.9]))
    plt.close(fig)
    fig = plots.sweep_plot(sweeps, ylabel="y", title="t", baseline=("before training", 0.26))
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert list(lines["before training"].get_ydata()) == [0.26, 0.26]
    plt.close(fig)


def test_arms_drawn_together_have_their_own_colours():
    """Chapter 14 draws the six losses in one figure, and the random rewards beside GRPO in another."""
    from course_lib.plots.lineage import ARM_COLOURS
    from course_lib.lm.lineage import LOSS_ARMS, RANDOM_ARMS
    for together in (LOSS_ARMS, (*RANDOM_ARMS, "grpo")):
        colours = [ARM_COLOURS[arm] for arm in together]
        assert len(set(colours)) == len(colours), together
