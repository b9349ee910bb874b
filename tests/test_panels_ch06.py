"""Chapter 06's cap panel, moved end to end without a browser, checked against known values."""
import matplotlib.pyplot as plt

from course_lib.widgets import cap_panel


def _numbers(text):
    """{label start: (bias %, noise %)} parsed from the panel's text."""
    out = {}
    for line in text.splitlines()[1:]:
        parts = line.split("bias")
        bias = float(parts[1].split("%")[0])
        noise = float(parts[1].split("noise")[1].split("%")[0])
        out[parts[0].strip()[:3]] = (bias, noise)
    return out


def test_cap_panel_defaults_show_the_exact_values_at_c_2():
    text, fig = cap_panel().update()
    plt.close(fig)
    n = _numbers(text)
    assert n["no "] == (42.4, 31.0) and n["imp"] == (0.0, 58.8)
    assert n["TIS"] == (23.4, 31.7) and n["MIS"] == (26.8, 31.0)


def test_cap_panel_every_control_moves_and_large_caps_approach_is():
    p = cap_panel()
    for name, control in p.controls.items():
        for value in control.values():
            text, fig = p.update(**{name: value})
            assert len(fig.axes) == 2
            plt.close(fig)
            n = _numbers(text)
            assert n["TIS"][0] <= n["no "][0] and n["MIS"][0] >= 0
    text, fig = p.update(C=10.0, batch=256)
    plt.close(fig)
    n = _numbers(text)
    assert n["TIS"][0] < 10.0                           # C = 10: only the 19.7 action is truncated
    text, fig = p.update(batch=1024)
    plt.close(fig)
    assert _numbers(text)["imp"][1] == 29.4              # noise halves when the batch is 4x larger
