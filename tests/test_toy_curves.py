"""Chapter 07's summaries of stored runs: windows are counted in steps, not logged rows."""
import math

import pytest

from course_lib.toy import curves
from course_lib.rl import History


def run(steps, key="entropy/mean", value=lambda s: float(s)):
    """A History logging ``key`` = value(step) at the given steps, held-out accuracy at the last."""
    rows = [{"step": s, key: value(s)} for s in steps]
    rows[-1]["acc/heldout"] = 0.5
    return History(config={}, rows=rows)


def test_window_mean_counts_steps_so_thinned_and_full_logs_agree():
    full, thinned = run(range(1, 201)), run(range(2, 201, 2))
    # last 20 steps of a full log: 181..200, mean 190.5; of one logged every 2nd step: 182..200, mean 191
    assert curves.window_mean(full, "entropy/mean", last=20) == pytest.approx(190.5)
    assert curves.window_mean(thinned, "entropy/mean", last=20) == pytest.approx(191.0)
    # the row-based mean would take 40 steps of the thinned log (162..200)
    assert thinned.mean("entropy/mean", 20) == pytest.approx(181.0)
    assert curves.window_mean(full, "entropy/mean", first=20) == pytest.approx(10.5)


def test_window_mean_skips_missing_values_and_rejects_ambiguous_windows():
    h = run(range(1, 11), value=lambda s: float("nan") if s % 2 else 1.0 * s)
    assert curves.window_mean(h, "entropy/mean", last=4) == pytest.approx((8 + 10) / 2)
    assert math.isnan(curves.window_mean(h, "no/such_key", last=4))
    with pytest.raises(ValueError, match="exactly one of last= and first="):
        curves.window_mean(h, "entropy/mean", last=3, first=3)
    with pytest.raises(ValueError, match="exactly one"):
        curves.window_mean(h, "no/such_key")


def test_seed_values_and_table_use_the_last_accuracy_and_step_windows():
    runs = {"a": [run(range(2, 201, 2)), run(range(2, 201, 2), value=lambda s: 2.0 * s)]}
    assert curves.seed_values(runs, "entropy/mean", last_n=20) == {"a": [191.0, 382.0]}
    assert curves.seed_values(runs, "acc/heldout") == {"a": [0.5, 0.5]}
    table = curves.final_table(runs, ["acc/heldout", "entropy/mean"], last_n=20)
    assert table.splitlines()[1].split() == ["a", "0.500", "/", "0.500", "191.000", "/", "382.000"]


def long_runs():
    keys = ["acc/heldout", "mismatch/abs_logratio_p99", "is/zero_frac", "clip/low_frac"]
    def h(seed):
        rows = [{"step": s, **{k: 0.1 * seed + s / 1000 for k in keys[1:]}} for s in range(2, 201, 2)]
        rows[-1]["acc/heldout"] = 0.5 + seed / 10
        return History(config={"seed": seed}, rows=rows)
    return keys, {"pi_old recomputed by the learner": [h(0), h(1), h(2)], "b": [h(0), h(1), h(2)]}


def test_final_table_sizes_columns_from_their_content_and_keeps_lines_short():
    keys, runs = long_runs()
    table = curves.final_table(runs, keys, width=100)
    lines = table.splitlines()
    assert all(len(line) <= 100 for line in lines), max(map(len, lines))
    blocks = [b.splitlines() for b in table.split("\n\n")]
    assert len(blocks) == 2                        # four 21-character columns do not fit in 100
    headers = [k for b in blocks for k in b[0].split()[1:]]
    assert headers == keys                         # no two headers run together
    for b in blocks:
        head = b[0]
        for k in head.split()[1:]:
            right = head.index(k) + len(k)         # each column ends where its header ends
            for row in b[1:3]:
                assert row[right - 1] != " " and (right == len(row) or row[right:right + 2] == "  "), (k, row)
    row = next(line for line in blocks[0] if line.startswith("b "))
    assert "0.500 / 0.600 / 0.700" in row
    # a wide limit keeps one table
    assert "\n\n" not in curves.final_table(runs, keys, width=200)


def test_plot_runs_legend_is_outside_the_panels_and_names_labels_seeds_and_mean():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    keys, runs = long_runs()
    fig = curves.plot_runs(runs, keys[:3], window=5, title="t")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_ylabel() for ax in axes] == keys[:3]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[:2] == list(runs) and "mean of 3 seeds" in texts
    assert [t for t in texts if t.startswith("seed")] == ["seed 0", "seed 1", "seed 2"]
    canvas = FigureCanvasAgg(fig)              # the figure comes back closed: give it a canvas
    canvas.draw()
    r = canvas.get_renderer()
    leg = fig.legends[0].get_window_extent(r)
    assert not any(leg.overlaps(ax.get_window_extent(r)) for ax in axes)
    # per label and panel: one thin line per seed and one thick mean line
    widths = sorted(line.get_linewidth() for line in axes[1].lines)
    assert len(widths) == 2 * 4 and widths[-2:] == [2.4, 2.4] and widths[0] < 1.5
    assert all(t.get_fontsize() >= 10 for ax in axes for t in ax.get_xticklabels() + ax.get_yticklabels())


def test_seed_mean_averages_the_steps_every_seed_logged():
    a = History(config={}, rows=[{"step": 1, "k": 1.0}, {"step": 2, "k": 3.0}, {"step": 3, "k": 5.0}])
    b = History(config={}, rows=[{"step": 1, "k": 3.0}, {"step": 3, "k": 7.0}])
    assert curves.seed_mean([a, b], "k") == ([1.0, 3.0], [2.0, 6.0])


def test_per_seed_formats_one_number_per_seed():
    assert curves.per_seed([0.7481, 0.676, float("nan")]) == "0.748 / 0.676 / nan"
    assert curves.per_seed([1024.0, 1023.6], ".0f") == "1024 / 1024"
    assert curves.per_seed([None, 0.5]) == "- / 0.500"


def test_plot_runs_fits_the_notebook_column_at_its_own_size():
    """JupyterLab at 1366 px with the file browser open leaves about 930 px for an output; a wider
    figure is shown scaled down (its 10-point labels then read at 8 px): two panels and the legend
    must fit at 100%."""
    import struct
    from IPython.core.pylabtools import print_figure
    keys, runs = long_runs()
    fig = curves.plot_runs(runs, keys[:4], window=5, title="t")
    width, _ = struct.unpack(">II", print_figure(fig, "png", bbox_inches="tight")[16:24])
    assert width <= 880


def finals(*values):
    """A History per value: held-out accuracy logged once, at step 200."""
    return [History(config={"seed": s}, rows=[{"step": 200, "acc/heldout": v}]) for s, v in enumerate(values)]


def test_against_calls_a_gap_inside_the_larger_seed_range_a_tie():
    runs = {"ref": finals(0.70, 0.74, 0.72), "close": finals(0.74, 0.76, 0.75),
            "high": finals(0.80, 0.81, 0.82), "wide": finals(0.60, 0.95, 0.90), "low": finals(0.5, 0.5, 0.5)}
    rows = {r["label"]: r for r in curves.against(runs, "acc/heldout", "ref")}
    assert rows["close"]["gap"] == pytest.approx(0.03) and rows["close"]["differs"] == 0   # ref's range: 0.04
    assert rows["high"]["differs"] == 1 and rows["low"]["differs"] == -1
    assert rows["wide"]["range"] == pytest.approx(0.35) and rows["wide"]["differs"] == 0  # its own noise
    assert rows["close"]["bar"] == pytest.approx(0.04) and rows["wide"]["bar"] == pytest.approx(0.35)
    assert rows["ref"]["gap"] == 0 and rows["ref"]["differs"] == 0
    assert [r["label"] for r in curves.against(runs, "acc/heldout", "ref")][:2] == ["wide", "high"]   # by mean
    text = curves.against_table(curves.against(runs, "acc/heldout", "ref"), "ref")
    assert text.splitlines()[2].split()[-2:] == ["+0.090", "above"]
    with pytest.raises(ValueError, match="reference must be one of"):
        curves.against(runs, "acc/heldout", "grpo")


def test_plot_seed_values_draws_a_line_per_label_and_fits_the_column():
    import struct
    from IPython.core.pylabtools import print_figure
    runs = {f"a long label number {i} + advantages": finals(0.7, 0.71 + i / 100, 0.72) for i in range(24)}
    fig = curves.plot_seed_values(curves.against(runs, "acc/heldout", "a long label number 0 + advantages"),
                                  "acc/heldout", reference="a long label number 0 + advantages")
    assert len(fig.axes[0].get_yticklabels()) == 24
    width, _ = struct.unpack(">II", print_figure(fig, "png", bbox_inches="tight")[16:24])
    assert width <= 930


def test_identical_runs_groups_labels_equal_at_every_step_and_seed_but_the_clock():
    def hist(seed, acc, t):
        return History(config={"seed": seed}, rows=[{"step": 0, "acc/heldout": 0.3, "time/elapsed_s": 0.0},
                                                    {"step": 2, "acc/heldout": acc, "time/elapsed_s": t}])
    runs = {"a": [hist(0, 0.5, 1.0), hist(1, 0.6, 1.0)], "b": [hist(0, 0.5, 2.0), hist(1, 0.6, 3.0)],
            "c": [hist(0, 0.5, 1.0), hist(1, 0.7, 1.0)], "d": [hist(0, 0.5, 9.0), hist(1, 0.6, 1.0)]}
    assert curves.identical_runs(runs) == [["a", "b", "d"]]      # c differs in seed 1 only
    assert curves.identical_runs(runs, ignore=()) == []


def test_factor_effects_pair_runs_that_differ_in_one_factor_alone():
    from course_lib.toy.curves import factor_effects
    # acc = 0.5 + 0.2 [lr high] + 0.01 * seed, clip changes nothing but in seed 1 (+0.01)
    levels, runs = {}, {}
    for lr in (1, 2):
        for clip in (0.1, 1.0):
            label = f"lr {lr} clip {clip}"
            levels[label] = {"lr": lr, "clip": clip}
            runs[label] = [History(config={}, rows=[{"step": 0}, {"step": 1, "acc/heldout":
                           0.5 + 0.2 * (lr == 2) + 0.01 * s + 0.01 * (clip == 1.0 and s == 1)}])
                           for s in range(3)]
    eff = {e["factor"]: e for e in factor_effects(runs, "acc/heldout", levels)}
    assert eff["lr"]["diffs"] == pytest.approx([0.2] * 6) and eff["lr"]["consistent"]
    assert eff["clip"]["diffs"] == pytest.approx([0, 0.01, 0, 0, 0.01, 0]) and not eff["clip"]["consistent"]
    with pytest.raises(ValueError, match="factor 'lr' must take two values"):
        factor_effects(runs, "acc/heldout", {**levels, "x": {"lr": 3, "clip": 0.1}})


def test_the_helpers_chapters_07_and_08_call_instead_of_defining_their_own():
    from course_lib.toy import diagnosis, experiments
    h = run(range(2, 21, 2))                                       # logged every 2nd step
    assert curves.values_from(h, "entropy/mean", 16) == [16.0, 18.0, 20.0]       # from step 16 on
    assert curves.mean([1.0, 2.0, 6.0]) == 3.0
    by = {"grpo": {"values": [0.5, 0.6], "gap": 0.0, "range": 0.1},
          "x": {"values": [0.7, 0.8], "gap": 0.2, "range": 0.05}}
    assert curves.against_named(by, ["x"], "grpo") == "x (0.700 / 0.800, gap +0.200, 2.0 x the larger seed range)"
    assert curves.against_named(by, [], "grpo") == "none"
    rows = [{"T": 0.7, "G": 4, "measured": 0.2, "measured_se": 0.03},
            {"T": 1.3, "G": 4, "measured": 0.3, "measured_se": 0.04}]
    assert experiments.zero_signal_rise(rows, 4) == pytest.approx(0.1 / 0.05)      # 2 standard errors
    assert diagnosis.lag_cell([4, None, 12]) == "4/-/12"
    assert diagnosis.framework_names("no/such_monitor", "verl") == "—"
