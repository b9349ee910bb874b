"""Chapter 10's panel: every control moves, and the ratios it prints are the library's."""
from course_lib.widgets import split_panel


def _rows(text):
    """{strategy: [norm ratio per mode]} from the panel's table."""
    out = {}
    for line in text.splitlines()[4:]:
        out[line[:21].strip()] = [float(c.split("x")[0]) for c in line[21:].split(")")[:-1]]
    return out


def test_every_setting_prints_the_exact_rule_at_one_and_the_naive_factors():
    p = split_panel()
    for R, M in ((1, 1), (1, 6), (2, 3), (4, 2)):
        rows = _rows(p.update(world_size=R, n_micro=M, spread=0.0))
        assert rows["exact"] == [1.0, 1.0, 1.0]
        assert rows["rank-mean x R"] == [float(R)] * 3                   # equal lengths: pure factors
        assert rows["micro-mean, summed"] == [float(M)] * 3
        assert rows["global count, no x R"] == [round(1 / R, 2)] * 3


def test_the_spread_of_lengths_changes_the_table():
    p = split_panel()
    assert p.update(world_size=2, n_micro=2, spread=0.0) != p.update(world_size=2, n_micro=2, spread=1.5)
    assert "lengths 100-100" in p.update(world_size=1, n_micro=1, spread=0.0)


def test_the_split_figure_draws_every_naive_strategy_and_mode_from_the_rows():
    import math

    import matplotlib.pyplot as plt
    import torch

    from course_lib.rl import split as S
    from course_lib.plots import split_error_plot
    lengths = S.spread_lengths(48, 100, 0.6)
    mask = torch.arange(int(lengths.max()))[None] < lengths[:, None]
    rows = S.ratio_rows(mask, S.even_split(48, 2, 2), max_len=400)
    fig = split_error_plot(rows)
    size, angle = fig.axes[:2]
    naive = [r for r in rows if r[1] != "exact"]
    assert len(size.patches) == len(angle.patches) == len(naive)            # the exact rule is not drawn
    widths = sorted(round(p.get_width(), 9) for p in size.patches)
    assert widths == sorted(round(math.log2(r[2]), 9) for r in naive)      # log2 of |g| / |g_full|
    turned = max(p.get_width() for p in angle.patches)
    assert turned == max(math.degrees(math.acos(min(1.0, r[3]))) for r in naive) > 5
    plt.close(fig)
