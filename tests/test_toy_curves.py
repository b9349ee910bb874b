"""Chapter 07's summaries of stored runs: windows are counted in steps, not logged rows."""
import math

import pytest

from course_lib.toy import curves
from course_lib.toy.trainer import History


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


def test_per_seed_formats_one_number_per_seed():
    assert curves.per_seed([0.7481, 0.676, float("nan")]) == "0.748 / 0.676 / nan"
    assert curves.per_seed([1024.0, 1023.6], ".0f") == "1024 / 1024"
