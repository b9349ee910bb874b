"""Chapter 01's slider panels, headless: every control moved end to end, every printed number checked
against slow references written here (PPO's clip rule from the fact sheet §4.1/§7, GAE by hand)."""
import math

import matplotlib.pyplot as plt
import pytest

from course_lib.widgets import clip_panel, gae_panel


# ---- references ----------------------------------------------------------------------------------

def ref_objective(r, A, lo, hi, dual):
    j = min(r * A, min(max(r, lo), hi) * A)
    return max(j, dual * A) if (dual is not None and A < 0) else j


def ref_coefficient(r, A, lo, hi, dual):
    """Fact sheet §4.1: A > 0: rA up to 1+eps_high, then 0; A < 0: 0 below 1-eps_low, rA above,
    0 again beyond the dual clip."""
    if A > 0:
        return r * A if r <= hi else 0.0
    if r < lo or (dual is not None and r > dual):
        return 0.0
    return r * A


def ref_gae_row(rewards, values, gamma, lam):
    adv, next_v, next_a = [0.0] * len(rewards), 0.0, 0.0
    for t in range(len(rewards) - 1, -1, -1):
        next_a = rewards[t] + gamma * next_v - values[t] + gamma * lam * next_a
        adv[t], next_v = next_a, values[t]
    return adv


EXAMPLE = {0: ([0, 0, 0, 0, 0, 1.0], [0.40, 0.45, 0.50, 0.60, 0.70, 0.80]),
           1: ([0, 0, 0, 0.0], [0.50, 0.45, 0.35, 0.20])}


# ---- clip panel -----------------------------------------------------------------------------------

def _clip_rows(text):
    rows = []
    for line in text.splitlines()[3:]:                   # head line, header, rule
        A, *region, r, J, c, grad = line.split()
        rows.append((float(A), " ".join(region), float(r), float(J), float(c), grad))
    return rows


def _check_clip(p, result):
    text, fig = result
    v = p.values
    lo, hi = 1 - v["eps_low"], 1 + v["eps_high"]
    dual = v["dual_clip"] if v["dual"] else None
    rows = _clip_rows(text)
    assert len(rows) == (7 if v["dual"] else 6)
    assert f"[{lo:.2f}, {hi:.2f}]" in text
    for A, region, r, J, c, grad in rows:
        assert J == pytest.approx(ref_objective(r, A, lo, hi, dual), abs=1e-3)
        want_c = ref_coefficient(r, A, lo, hi, dual)
        assert c == pytest.approx(want_c, abs=1e-3)
        assert grad == ("stopped" if want_c == 0 else "flows")
        if region == "inside":
            assert r == 1.0
        elif region.startswith("r <"):
            assert r < lo or lo == 0
        elif region.startswith("r > 1+"):
            assert r > hi and (dual is None or r < dual)
        else:
            assert dual is not None and r > dual
    assert isinstance(fig, plt.Figure) and len(fig.axes) == 4
    plt.close(fig)


def test_clip_panel_defaults_are_verls_and_stop_exactly_three_cases():
    p = clip_panel()
    text, fig = p.update()
    plt.close(fig)
    assert "clip range [0.80, 1.20]   dual clip: c = 3.00" in text
    stopped = [(A, region) for A, region, *_, grad in _clip_rows(text) if grad == "stopped"]
    assert stopped == [(1.0, "r > 1+eps_high"), (-1.0, "r < 1-eps_low"), (-1.0, "r > dual clip c")]
    assert "+1   r > 1+eps_high  1.400  +1.200   +0.000   stopped" in text


def test_clip_panel_every_control_moves_end_to_end_and_matches_the_reference():
    p = clip_panel()
    for name, control in p.controls.items():
        for value in control.values():
            _check_clip(p, p.update(**{name: value}))


def test_clip_panel_clip_higher_moves_only_the_upper_edge():
    p = clip_panel()
    text, fig = p.update(eps_low=0.2, eps_high=0.28, dual=False)
    plt.close(fig)
    assert "clip range [0.80, 1.28]   dual clip: off" in text
    assert (-1.0, "r > 1+eps_high", 1.48, -1.48, -1.48, "flows") in _clip_rows(text)
    assert (1.0, "r > 1+eps_high", 1.48, 1.28, 0.0, "stopped") in _clip_rows(text)


# ---- GAE panel ------------------------------------------------------------------------------------

def _check_gae(p, result):
    text, fig = result
    gamma, lam = p.values["gamma"], p.values["lam"]
    rows = [line.split() for line in text.splitlines()[3:]]
    assert len(rows) == 10
    adv = {i: ref_gae_row(*EXAMPLE[i], gamma, lam) for i in (0, 1)}
    flat = [a for i in (0, 1) for a in adv[i]]
    mean = sum(flat) / len(flat)
    std = math.sqrt(sum((a - mean) ** 2 for a in flat) / (len(flat) - 1) + 1e-8)
    for resp, t, reward, V, A, ret, white in rows:
        i, t = int(resp), int(t)
        assert float(reward) == EXAMPLE[i][0][t] and float(V) == pytest.approx(EXAMPLE[i][1][t])
        assert float(A) == pytest.approx(adv[i][t], abs=1e-4)
        assert float(ret) == pytest.approx(adv[i][t] + EXAMPLE[i][1][t], abs=1e-4)
        assert float(white) == pytest.approx((adv[i][t] - mean) / std, abs=1e-4)
    assert isinstance(fig, plt.Figure) and len(fig.axes) == 2
    plt.close(fig)


def test_gae_panel_defaults_show_the_chapter_numbers():
    text, fig = gae_panel().update()
    plt.close(fig)
    assert "gamma = 1.00   lambda = 0.95" in text
    assert "   0  0       0  0.40  +0.5097  0.9097       +1.0544" in text
    assert "   1  3       0  0.20  -0.2000  0.0000       -0.7290" in text


def test_gae_panel_every_slider_moves_end_to_end_and_matches_the_reference():
    p = gae_panel()
    for name, control in p.controls.items():
        for value in control.values():
            _check_gae(p, p.update(**{name: value}))


def test_gae_panel_lambda_one_gives_reward_minus_value():
    text, fig = gae_panel().update(gamma=1.0, lam=1.0)
    plt.close(fig)
    assert "   0  0       0  0.40  +0.6000  1.0000" in text and "   1  0       0  0.50  -0.5000  0.0000" in text


@pytest.mark.parametrize("make, changes, word", [
    (clip_panel, {"eps_low": 0.7}, "eps_low"), (clip_panel, {"dual_clip": 1.0}, "dual_clip"),
    (clip_panel, {"dual": 1}, "dual"), (gae_panel, {"gamma": 1.2}, "gamma"),
    (gae_panel, {"lam": "x"}, "lam"), (gae_panel, {"beta": 0.1}, "beta")])
def test_panels_reject_bad_values_naming_the_control(make, changes, word):
    with pytest.raises(ValueError, match=word):
        make().update(**changes)
