"""Chapter 03 and 04 panels and figures, headless: every slider moved, every shown number checked
against closed forms written here (nothing imported from course_lib for the expected values)."""
import math

import matplotlib.pyplot as plt
import torch
import pytest

from course_lib import plots
from course_lib.widgets import AGG_PANEL_MAX_LEN, aggregation_panel

MODES = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm", "seq-mean-token-sum")


# ---- chapter 03 ----

def _expected(rewards, lengths, L_max):
    """Closed-form per-token and whole-response weights of the four modes, in MODES order."""
    n, mean = len(rewards), sum(rewards) / len(rewards)
    if all(r == rewards[0] for r in rewards):
        adv = [0.0] * n
    else:
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
        adv = [(r - mean) / (std + 1e-6) for r in rewards]
    alphas = [[1 / (n * m) for m in lengths], [1 / sum(lengths)] * n, [1 / (n * L_max)] * n, [1 / n] * n]
    per_token = [[a * w for a, w in zip(adv, alpha)] for alpha in alphas]
    whole = [[p * m for p, m in zip(pt, lengths)] for pt in per_token]
    return adv, per_token, whole


def _tables(text):
    """Parse the panel's two tables -> (per-token rows, whole rows), each row [i, R, L, adv, 4 modes]."""
    blocks = text.split("\n\n")
    assert len(blocks) == 2
    return [[[float(x) for x in line.split()] for line in b.splitlines()[3:]] for b in blocks]


def _check_text(values, text):
    R = [values[f"R{i}"] for i in range(4)]
    L = [values[f"L{i}"] for i in range(4)]
    adv, per_token, whole = _expected(R, L, AGG_PANEL_MAX_LEN)
    tok_rows, whole_rows = _tables(text)
    for i in range(4):
        for rows, exp, rel in ((tok_rows, per_token, 6e-3), (whole_rows, whole, 2e-3)):
            assert rows[i][:3] == [i, R[i], L[i]]
            assert rows[i][3] == pytest.approx(adv[i], abs=6e-4)
            for j in range(4):      # printed with 3 significant digits (per token) or 3 decimals (whole)
                assert rows[i][4 + j] == pytest.approx(exp[j][i], rel=rel, abs=6e-4 if rows is whole_rows else 1e-12)


def _check_bars(values, fig):
    R = [values[f"R{i}"] for i in range(4)]
    L = [values[f"L{i}"] for i in range(4)]
    _, per_token, whole = _expected(R, L, AGG_PANEL_MAX_LEN)
    axes = fig.axes
    assert len(axes) == 8
    for j in range(4):
        for ax, exp in ((axes[j], per_token[j]), (axes[4 + j], whole[j])):
            heights = [p.get_height() for p in ax.patches]
            assert heights == pytest.approx(exp, rel=1e-5, abs=1e-12)


def test_aggregation_panel_defaults_are_the_seed_table():
    p = aggregation_panel()
    text, fig = p.update()
    _check_bars(p.values, fig)
    plt.close(fig)
    for s in ("+1.08e-03", "-4.33e-03", "-1.08e-04", "+5.41e-04", "+3.27e-04", "-3.27e-04",
              "+0.065", "-0.016", "-0.654", "+0.131", "+0.217", "-0.217"):
        assert s in text


def test_aggregation_panel_every_slider_every_position_tables(monkeypatch):
    # the figure is checked at the ends below; here only the tables, so that all 332 positions run fast
    monkeypatch.setattr(plots.aggregation, "aggregation_bars", lambda *a, **k: None)
    p = aggregation_panel()
    for name, control in p.controls.items():
        for value in control.values():
            text, fig = p.update(**{name: value})
            assert fig is None
            _check_text(p.values, text)
        p.update(**{name: control.default})


def test_aggregation_panel_every_slider_at_both_ends_redraws_the_bars():
    p = aggregation_panel()
    for name, control in p.controls.items():
        for value in (control.lo, control.hi):
            text, fig = p.update(**{name: value})
            _check_text(p.values, text)
            _check_bars(p.values, fig)
            plt.close(fig)
        p.update(**{name: control.default})


def test_aggregation_panel_equal_rewards_give_zero_weights():
    text, fig = aggregation_panel().update(R0=0.5, R1=0.5, R2=0.5, R3=0.5)
    plt.close(fig)
    tok_rows, whole_rows = _tables(text)
    assert all(v == 0 for row in tok_rows + whole_rows for v in row[3:])


@pytest.mark.parametrize("changes, word", [({"L0": 30}, "L0"), ({"L1": 4100}, "L1"), ({"R2": 1.5}, "R2"),
                                           ({"L3": 125.5}, "L3"), ({"G": 4}, "G")])
def test_aggregation_panel_rejects_bad_values_naming_the_control(changes, word):
    with pytest.raises(ValueError, match=word):
        aggregation_panel().update(**changes)


def test_overlong_plot_draws_dapo_eq13():
    fig = plots.overlong_penalty_plot(20480, 4096)
    xs, ys = fig.axes[0].lines[0].get_data()
    plt.close(fig)
    for x, y in zip(xs, ys):
        exp = 0.0 if x <= 16384 else (-1.0 if x > 20480 else (16384 - x) / 4096)
        assert y == pytest.approx(exp, abs=1e-6)
    assert max(xs) > 20480 and min(xs) == 0


def test_length_sweep_plot_curves_are_relative_pushes():
    R, L = [1.0, 0.0, 0.0, 1.0], [200, 50, 2000, 400]
    sweep = [50, 100, 1000, 4000]
    fig = plots.length_sweep_plot(R, L, 2, sweep, 4096)
    per_tok_lines, whole_lines = fig.axes[0].lines, fig.axes[1].lines
    plt.close(fig)
    for j in range(4):
        exp_tok, exp_whole = [], []
        for n in sweep:
            lens = list(L)
            lens[2] = n
            _, pt, wh = _expected(R, lens, 4096)
            exp_tok.append(pt[j][2])
            exp_whole.append(wh[j][2])
        assert list(per_tok_lines[j].get_ydata()) == pytest.approx([v / exp_tok[0] for v in exp_tok], rel=1e-6)
        assert list(whole_lines[j].get_ydata()) == pytest.approx([v / exp_whole[0] for v in exp_whole], rel=1e-6)


# ---- chapter 04 ----

from course_lib.widgets import adaptive_kl_panel, kl_drift_panel  # noqa: E402


def _seed_stats(drift):
    """The seed's code, verbatim, at another drift: exact KL and (mean, std, negative share) of k1/k2/k3."""
    torch.manual_seed(0)
    p_ref = torch.randn(1000).softmax(-1)
    q = (p_ref.log() + drift * torch.randn(1000)).softmax(-1)
    exact = float((q * (q / p_ref).log()).sum())
    x = torch.multinomial(q, 100_000, replacement=True)
    r = p_ref[x] / q[x]
    ks = {"k1": -r.log(), "k2": r.log() ** 2 / 2, "k3": (r - 1) - r.log()}
    return exact, {k: (float(v.mean()), float(v.std()), float((v < 0).float().mean())) for k, v in ks.items()}


def _check_drift_text(drift, text):
    exact, stats = _seed_stats(drift)
    lines = text.splitlines()
    assert float(lines[0].split("=")[1].split()[0]) == pytest.approx(exact, abs=6e-5)
    for line in lines[3:]:
        kind, mean, bias, bias_kl, z, std, std_kl, neg = line.split()
        m, s, n = stats[kind]
        assert float(mean) == pytest.approx(m, abs=6e-5, rel=2e-3)
        assert float(std) == pytest.approx(s, abs=6e-5, rel=2e-3)
        assert float(bias) == pytest.approx(m - exact, abs=1e-4)
        assert float(std_kl) == pytest.approx(s / exact, rel=5e-3, abs=6e-3)
        assert float(neg) == pytest.approx(100 * n, abs=0.6)


def test_drift_panel_default_is_the_seed():
    # the seed's own float32 run (its digits are the seed's on AVX2/AVX-512 kernels; test_sim_kl checks
    # them within their standard errors on every CPU)
    from course_lib.sim.kl import sampled_kl
    text, fig = kl_drift_panel().update()
    plt.close(fig)
    assert text == plots.kl_drift_table(sampled_kl(V=1000, drift=0.3, n=100_000, seed=0))
    assert "exact KL(pi || pi_ref) = 0.0502" in text


def test_drift_panel_every_position(monkeypatch):
    monkeypatch.setattr(plots.kl, "kl_drift_figure", lambda *a, **k: None)
    p = kl_drift_panel()
    for value in p.controls["drift"].values():
        text, fig = p.update(drift=value)
        _check_drift_text(value, text)


def test_drift_panel_ends_draw_the_bias_and_spread():
    p = kl_drift_panel()
    for value in (0.1, 2.0):
        text, fig = p.update(drift=value)
        exact, stats = _seed_stats(value)
        ax_hist, ax_bias, ax_std = fig.axes[0], fig.axes[1], fig.axes[2]
        assert [b.get_height() for b in ax_bias.patches] == pytest.approx(
            [(stats[k][0] - exact) / exact for k in ("k1", "k2", "k3")], rel=1e-3, abs=1e-4)
        assert [b.get_height() for b in ax_std.patches] == pytest.approx(
            [stats[k][1] / exact for k in ("k1", "k2", "k3")], rel=1e-3)
        plt.close(fig)
    with pytest.raises(ValueError, match="drift"):
        p.update(drift=0.0)


def _controller(target, adaptive, steps=3000):
    """Plain loop with the same seeded draws: N(mu, 1) policy, N(0, 1) reference, reward 0.05 x."""
    gen = torch.Generator().manual_seed(0)
    mu, beta, kls = 0.0, 0.2, []
    for _ in range(steps):
        beta_used = beta                                                    # the beta of this step
        mu += 0.5 * (0.05 - beta * mu)
        kls.append(mu * mu / 2)
        if adaptive:
            x = mu + torch.randn(1, 64, generator=gen, dtype=torch.float64)
            measured = float((-0.5 * (x - mu) ** 2 + 0.5 * x ** 2).mean())
            e = min(max(measured / target - 1, -0.2), 0.2)
            beta = beta * (1 + e * 64 / 10000)
    return beta_used, sum(kls[-500:]) / 500


def test_adaptive_panel_every_target(monkeypatch):
    monkeypatch.setattr(plots.kl, "adaptive_kl_plot", lambda *a, **k: None)
    p = adaptive_kl_panel()
    for value in p.controls["target_kl"].values():
        text, fig = p.update(target_kl=value)
        lines = text.splitlines()
        assert lines[0] == f"target KL = {value:g}"
        ada, fix = lines[3].split(), lines[4].split()
        beta, kl_tail = _controller(value, True)
        assert float(ada[1]) == pytest.approx(beta, abs=6e-5)
        assert float(ada[2]) == pytest.approx(kl_tail, abs=6e-5)
        assert abs(kl_tail / value - 1) < 0.06                              # within 6% of every target
        assert float(fix[2]) == pytest.approx(0.05 ** 2 / (2 * 0.04), abs=6e-5)


def test_adaptive_panel_ends_draw_beta_and_kl():
    p = adaptive_kl_panel()
    for value in (0.01, 0.2):
        text, fig = p.update(target_kl=value)
        ax_beta, ax_kl = fig.axes
        beta_line = ax_beta.lines[0].get_ydata()
        assert beta_line[0] == 0.2 and len(beta_line) == 3000
        assert any(line.get_ydata()[0] == value for line in ax_kl.lines)   # the target line
        plt.close(fig)
