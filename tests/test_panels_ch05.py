"""Chapter 05's panels and figures, headless: every slider moved end to end, every printed value and
every plotted curve compared with c(r, A) written here from the fact sheet's formulas (§4, §7)."""
import math

import matplotlib
import matplotlib.pyplot as plt
import pytest

from course_lib import plots
from course_lib.widgets import grad_coefficient_panel, sapo_gate_panel

matplotlib.use("Agg")


# ---- slow references: one token, one ratio, the formulas of the fact sheet ----
def ref_clip(r, A, eps_low, eps_high, dual_clip=None):
    """PPO / DAPO: r A on the allowed side, 0 where the clip binds; dual clip zeroes A < 0, r > c."""
    if A > 0:
        return r * A if r <= 1 + eps_high else 0.0
    if r < 1 - eps_low:
        return 0.0
    if dual_clip is not None and r > dual_clip:
        return 0.0
    return r * A


def ref_cispo(r, A, eps_high):
    return min(r, 1 + eps_high) * A                      # no lower bound, weight detached


def ref_sapo(r, A, tau_pos, tau_neg):
    tau = tau_pos if A > 0 else tau_neg
    s = 1 / (1 + math.exp(-tau * (r - 1)))
    return 4 * s * (1 - s) * r * A


def ref_curves(v):
    """label -> {sign: c(r)} for the panel's values v."""
    el, eh, c, tp, tn = v["eps_low"], v["eps_high"], v["dual_clip"], v["tau_pos"], v["tau_neg"]
    return {"PPO/GRPO": lambda r, A: ref_clip(r, A, el, el),
            "DAPO": lambda r, A: ref_clip(r, A, el, eh),
            "dual clip": lambda r, A: ref_clip(r, A, el, eh, c),
            "CISPO": lambda r, A: ref_cispo(r, A, eh),
            "SAPO": lambda r, A: ref_sapo(r, A, tp, tn)}


def near_a_kink(r, v):
    kinks = (1 - v["eps_low"], 1 + v["eps_low"], 1 + v["eps_high"], v["dual_clip"])
    return any(abs(r - k) < 1e-9 for k in kinks)           # a tie: autograd splits the gradient


def parse(text, skip):
    return [[float(x) for x in line.split()] for line in text.splitlines()[skip:]]


COLUMNS = [("PPO/GRPO", 1), ("DAPO", 1), ("CISPO", 1), ("SAPO", 1),
           ("PPO/GRPO", -1), ("DAPO", -1), ("dual clip", -1), ("CISPO", -1), ("SAPO", -1)]


def check_coefficient_view(v, result):
    text, fig = result
    ref = ref_curves(v)
    rows = parse(text, 2)
    assert [row[0] for row in rows] == list(plots.COEF_RATIOS)
    for row in rows:
        r = row[0]
        for (label, sign), got in zip(COLUMNS, row[1:]):
            if not near_a_kink(r, v):
                assert got == pytest.approx(ref[label](r, sign), abs=6e-4), (label, sign, r, v)
    for ax, sign in zip(fig.axes, (1, -1)):
        curves = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
        assert set(curves) == set(ref) - ({"dual clip"} if sign > 0 else set())
        for label, line in curves.items():
            xs, ys = line.get_xdata(), line.get_ydata()
            for i in range(0, len(xs), 37):
                if not near_a_kink(float(xs[i]), v):
                    assert float(ys[i]) == pytest.approx(ref[label](float(xs[i]), sign), abs=1e-6)
    plt.close(fig)


def test_coefficient_panel_defaults_show_the_fact_sheets_values():
    text, fig = grad_coefficient_panel().update()
    plt.close(fig)
    rows = {row[0]: dict(zip(COLUMNS, row[1:])) for row in parse(text, 2)}
    assert rows[1.21][("PPO/GRPO", 1)] == 0.0 and rows[1.27][("DAPO", 1)] == 1.27
    assert rows[1.29][("DAPO", 1)] == 0.0 and rows[0.79][("DAPO", -1)] == 0.0
    assert rows[2.9][("dual clip", -1)] == -2.9 and rows[3.1][("dual clip", -1)] == 0.0
    assert rows[6.0][("DAPO", -1)] == -6.0 and rows[6.0][("CISPO", 1)] == 1.28
    assert [rows[r][("SAPO", 1)] for r in (0.5, 1.0, 2.0, 6.0)] == [0.470, 1.0, 1.573, 0.160]
    assert [rows[r][("SAPO", -1)] for r in (0.5, 1.0, 2.0, 6.0)] == [-0.467, -1.0, -1.536, -0.125]
    assert all(v != 0 for row in rows.values() for k, v in row.items() if k[0] in ("CISPO", "SAPO"))


# Every slider value chapter 05's prose names (the panel's "things to try", section 6's floors, CISPO
# with TRL's absolute cap 5 = eps_high 4, SAPO's tau_pos that matches a 0.2 clip).
PROSE_CASES = {"eps_low": [0.2, 0.28, 0.5, 0.9], "eps_high": [0.2, 0.28, 4.0], "dual_clip": [1.5, 3.0],
               "tau_pos": [1.0, 8.8], "tau_neg": [1.05]}


def positions(control, name, n=12):
    """Both ends, every case the prose names, and about n positions in between."""
    vals = control.values()
    picked = set(vals[::max(1, len(vals) // n)]) | {vals[0], vals[-1]}
    return sorted(picked | {v for v in vals if v in PROSE_CASES.get(name, [])})


@pytest.mark.parametrize("panel_fn", [grad_coefficient_panel, sapo_gate_panel])
def test_every_case_the_prose_names_is_a_slider_position(panel_fn):
    p = panel_fn()
    for name, control in p.controls.items():
        missing = [v for v in PROSE_CASES[name] if v not in control.values()]
        assert not missing, f"{panel_fn.__name__}: {name} cannot reach {missing} (range {control.lo}..{control.hi})"


def test_coefficient_panel_every_slider_moves_end_to_end_and_matches_the_formulas():
    p = grad_coefficient_panel()
    assert set(p.controls) == {"eps_low", "eps_high", "dual_clip", "tau_pos", "tau_neg"}
    for name, control in p.controls.items():
        for value in positions(control, name):
            check_coefficient_view(p.values, p.update(**{name: value}))
        p.update(**{name: control.default})


def check_sapo_view(v, result):
    text, fig = result
    assert text.splitlines()[0] == f"tau_pos = {v['tau_pos']:.2f}, tau_neg = {v['tau_neg']:.2f}"
    for r, w_pos, w_neg, c_pos, c_neg in parse(text, 3):
        assert c_pos == pytest.approx(ref_sapo(r, 1, v["tau_pos"], v["tau_neg"]), abs=6e-4)
        assert c_neg == pytest.approx(ref_sapo(r, -1, v["tau_pos"], v["tau_neg"]), abs=6e-4)
        assert w_pos == pytest.approx(ref_sapo(r, 1, v["tau_pos"], v["tau_neg"]) / r, abs=6e-4)
        assert w_neg == pytest.approx(-ref_sapo(r, -1, v["tau_pos"], v["tau_neg"]) / r, abs=6e-4)
    ax1, ax2 = fig.axes
    for ln in ax2.get_lines():
        if ln.get_label().startswith("SAPO"):
            sign = 1 if "+1" in ln.get_label() else -1
            for x, y in list(zip(ln.get_xdata(), ln.get_ydata()))[::41]:
                assert float(y) == pytest.approx(ref_sapo(float(x), sign, v["tau_pos"], v["tau_neg"]),
                                                 abs=1e-6)
    plt.close(fig)


def test_sapo_panel_defaults_show_the_asymmetric_gate():
    text, fig = sapo_gate_panel().update()
    plt.close(fig)
    rows = {row[0]: row[1:] for row in parse(text, 3)}
    assert rows[1.0] == [1.0, 1.0, 1.0, -1.0]                       # on-policy: c = A
    assert all(rows[r][1] < rows[r][0] for r in (0.5, 2.0, 3.0, 6.0))   # tau_neg > tau_pos: damped more


def test_sapo_panel_every_slider_moves_end_to_end_and_matches_the_formula():
    p = sapo_gate_panel()
    assert set(p.controls) == {"tau_pos", "tau_neg"}
    for name, control in p.controls.items():
        for value in positions(control, name):
            check_sapo_view(p.values, p.update(**{name: value}))


@pytest.mark.parametrize("panel_fn, changes, word", [
    (grad_coefficient_panel, {"eps_low": 1.0}, "eps_low"),
    (grad_coefficient_panel, {"dual_clip": 1.0}, "dual_clip"),
    (sapo_gate_panel, {"tau_neg": 0.0}, "tau_neg"),
    (sapo_gate_panel, {"tau_pos": "x"}, "tau_pos")])
def test_panels_reject_bad_values_naming_the_control(panel_fn, changes, word):
    with pytest.raises(ValueError, match=word):
        panel_fn().update(**changes)


def test_gspo_dropout_figure_drops_whole_rows_and_token_clipping_single_tokens():
    fig = plots.gspo_dropout_view()
    dapo, gspo = (ax.images[0].get_array() for ax in fig.axes[:2])
    plt.close(fig)
    kept_rows = dropped_rows = 0
    for i in range(gspo.shape[0]):
        valid = [int(x) for x in gspo[i] if int(x) != 0]           # 0 = padding
        assert len(set(valid)) == 1                                 # a response is kept or dropped whole
        dropped_rows += valid[0] == 1
        kept_rows += valid[0] != 1
    assert dropped_rows and kept_rows
    mixed = [len({int(x) for x in dapo[i] if int(x) != 0}) == 2 for i in range(dapo.shape[0])]
    assert sum(mixed) >= 4


@pytest.mark.parametrize("panel_fn, name, value", [(grad_coefficient_panel, "eps_high", 0.4),
                                                   (sapo_gate_panel, "tau_neg", 2.0)])
def test_panel_widgets_build_and_re_render_when_a_slider_moves(panel_fn, name, value):
    p = panel_fn()
    box = p.widget()
    row = box.children[0].children                      # controls, or columns of them
    sliders = {s.description: s for child in row for s in getattr(child, "children", [child])}
    assert set(sliders) == set(p.controls)
    sliders[name].value = value
    assert p.values[name] == value
    plt.close("all")


def test_clipping_vs_noise_plot_draws_the_rows():
    from course_lib.sim import ratios as sr
    z, mask, adv = sr.simulated_batch(16, 5, 40, seed=0)
    rows = sr.clipping_vs_noise((0.01, 0.1, 0.3), z, mask, adv)
    fig = plots.clipping_vs_noise_plot(rows)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert list(lines["responses dropped, GSPO"].get_ydata()) == [r.gspo_seq_dropped for r in rows]
    assert list(lines["tokens dropped, DAPO"].get_ydata()) == [r.token_dropped for r in rows]
    assert list(lines["tokens dropped, CISPO"].get_ydata()) == [0.0, 0.0, 0.0]
    plt.close(fig)


# ---- the framework losses beside their parents: each curve against its formula, one token ----
def ref_framework(label, r, A):
    """c(r, A) of a one-token response (p_old = 1), written from each paper's / framework's formula."""
    lo, hi = math.exp(-0.2), math.exp(0.2)
    if label == "GSPO":
        return ref_clip(r, A, 3e-4, 4e-4)
    if label == "GMPO":                                   # PPO's clip in log space, [e^-0.2, e^0.2]
        return ref_clip(r, A, 1 - lo, hi - 1)
    if label == "CISPO":
        return ref_cispo(r, A, 0.28)
    if label == "VESPO":                                  # e^lam w^k e^(-lam w), (k, lam) by sign
        k, lam = (2.0, 3.0) if A >= 0 else (3.0, 2.0)
        return math.exp(lam) * r ** k * math.exp(-lam * r) * A
    if label == "GPG":
        return A
    if label == "DRO, beta 1":
        return A - math.log(r)
    if label == "PPO":
        return ref_clip(r, A, 0.2, 0.2)
    if label == "Clip-Cov, selected":
        return 0.0
    if label == "KL-Cov, not selected":
        return r * A
    if label == "KL-Cov, selected":                       # d/dlogp of 0.1 |log r|
        return r * A - 0.1 * math.copysign(1.0, math.log(r)) * (r != 1)
    raise KeyError(label)


def test_framework_coefficient_curves_match_their_formulas():
    text, fig = plots.framework_coefficient_view()
    seen = set()
    n_cols = len(plots.FRAMEWORK_PAIRS)
    for k, ax in enumerate(fig.axes):
        sign = 1 if k < n_cols else -1                    # row 0: A = +1, row 1: A = -1
        for line in ax.get_lines():
            label = line.get_label()
            if label.startswith("_"):
                continue
            seen.add(label)
            xs, ys = line.get_xdata(), line.get_ydata()
            for i in range(0, len(xs), 23):
                r = float(xs[i])
                if min(abs(r - k) for k in (1.0, 1 + 4e-4, 1 - 3e-4, math.exp(0.2), math.exp(-0.2), 1.2, 0.8)) > 1e-3:
                    assert float(ys[i]) == pytest.approx(ref_framework(label, r, sign), abs=1e-6), (label, sign, r)
    assert seen == {lab for curves in plots.FRAMEWORK_PAIRS.values() for lab, *_ in curves}
    assert len(text.splitlines()) == 2 + 2 * sum(len(c) for c in plots.FRAMEWORK_PAIRS.values())
    plt.close(fig)


def test_dppo_curves_keep_exactly_the_tokens_inside_the_tv_region():
    text, fig = plots.dppo_coefficient_view()
    for ax, sign in zip(fig.axes, (1, -1)):
        for line in ax.get_lines():
            label = line.get_label()
            if not label.startswith("TV"):
                continue
            p_old = float(label.split()[-1])
            for r, c in zip(line.get_xdata()[::17], line.get_ydata()[::17]):
                move = (r - 1) * p_old                      # pi - pi_old
                inside = move <= 0.2 if sign > 0 else move >= -0.2
                if abs(abs(move) - 0.2) > 1e-3:
                    assert c == pytest.approx(min(r, 3.0) * sign if inside else 0.0, abs=1e-9), (p_old, r)
    plt.close(fig)
