"""ScaleRL's compute curve: the fit recovers known parameters, says when the data do not pin them,
and reads a stored run's compute from its logged lengths."""
import math

import pytest
import torch

from course_lib.toy import scaling
from course_lib.rl.history import History


def test_the_fit_recovers_a_known_curve_and_its_ceiling():
    C = torch.logspace(3, 6, 12, dtype=torch.float64)
    R = scaling.curve(C, 0.3, 0.8, 1.5, 2e4)
    fit = scaling.fit_curve(C, R, 0.3)
    assert fit["A"] == pytest.approx(0.8, abs=5e-3)
    assert fit["B"] == pytest.approx(1.5, rel=0.05)
    assert fit["C_mid"] == pytest.approx(2e4, rel=0.05)
    assert fit["rmse"] < 1e-3 and not fit["at_edge"]


def test_noise_of_a_hundredth_moves_the_ceiling_by_about_as_much():
    C = torch.logspace(3, 6, 12, dtype=torch.float64)
    noise = 0.01 * torch.randn(12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fit = scaling.fit_curve(C, scaling.curve(C, 0.3, 0.8, 1.5, 2e4) + noise, 0.3)
    assert abs(fit["A"] - 0.8) < 0.03


def test_a_flat_run_and_one_past_any_ceiling_are_flagged_and_the_ceiling_is_bounded_by_one():
    C = torch.logspace(3, 4, 8, dtype=torch.float64)
    flat = scaling.fit_curve(C, torch.full((8,), 0.4, dtype=torch.float64), 0.4)
    assert flat["A"] == 0.4 and flat["at_edge"]                 # nothing learnt: B and C_mid unpinned
    steep = scaling.fit_curve(C, 0.2 + 2.0 * torch.log10(C / 1e3), 0.2)   # climbs past 1
    assert steep["A"] == 1.0 and steep["at_edge"]


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="C and R must be 1-D"):
        scaling.fit_curve([1.0, 2.0], [0.1, 0.2], 0.0)
    with pytest.raises(ValueError, match="C must be > 0"):
        scaling.fit_curve([0.0, 1.0, 2.0], [0.1, 0.2, 0.3], 0.0)


def test_compute_counts_the_response_tokens_of_the_steps_each_row_stands_for():
    rows = [{"step": 0, "acc/heldout": 0.3}] + [{"step": s, "len/all": 10.0 + s} for s in (2, 4, 6)]
    rows[2]["acc/heldout"] = 0.5
    h = History(config={}, rows=rows)
    steps, comp = scaling.compute_axis(h, batch=8)
    assert steps == [2, 4, 6]
    assert comp == [2 * 8 * 12.0, 2 * 8 * 12.0 + 2 * 8 * 14.0, 2 * 8 * (12.0 + 14.0 + 16.0)]
    with pytest.raises(ValueError, match="the fit needs 3"):
        scaling.fit_run(h, batch=8)
    assert math.isclose(scaling.curve([1.0], 0.1, 0.9, 1.0, 1.0)[0], 0.5)


@pytest.mark.parametrize("B_true, edge", [(0.15, 0), (15.0, -1)], ids=["shallower than the grid", "steeper"])
def test_a_slope_on_either_bound_of_its_grid_is_flagged_though_the_midpoint_and_ceiling_are_pinned(B_true, edge):
    C = torch.logspace(3, 6, 16, dtype=torch.float64)
    fit = scaling.fit_curve(C, scaling.curve(C, 0.3, 0.8, B_true, 3e4), 0.3)
    assert fit["B"] == float(scaling.B_GRID[edge])                  # the best slope lies on the bound
    assert 0.1 * 1e3 * 1.5 < fit["C_mid"] < 20 * 1e6 / 1.5 and fit["A"] < 0.95   # neither of the others does
    assert fit["at_edge"]
