"""Slider panels work without a browser: every control of every chapter panel can be moved, and what a
panel shows is checked against hand-computed values and the loop references of tests/reference.py
(never against course_lib itself)."""
import base64
import inspect
import re
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest

import reference as ref
from course_lib import widgets
from course_lib.widgets import Choice, Slider, Toggle, group_advantage_panel, panel, to_html
from course_lib.widgets.core import SLIDER_TRACK_PX, SLIDER_WIDTH_PX

METHODS = ("GRPO", "Dr. GRPO", "RLOO")


def _rows(text: str) -> list[list[float]]:
    """Parse the data rows of the panel's table: i, reward, GRPO, Dr. GRPO, RLOO."""
    lines = text.splitlines()[3:]                      # head line, header, rule
    return [[float(x) for x in line.split()] for line in lines]


def _bars(fig) -> dict[str, list[float]]:
    """Bar heights of the panel's chart by legend label, left to right."""
    ax = fig.axes[0]
    return {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}


def _shown(p, **changes):
    """Move controls; return (table rows, bar heights by method) of what the panel shows."""
    text, fig = p.update(**changes)
    rows, bars = _rows(text), _bars(fig)
    plt.close(fig)
    return text, rows, bars


# Hand-computed (Bessel std, eps 1e-6 negligible at 4 decimals):
#   [1,0,1,0]:  mean 1/2, std sqrt(1/3) = 0.5774, GRPO +-0.5/0.5774 = +-0.8660, Dr. GRPO +-0.5,
#               RLOO 1 - 1/3 = +0.6667 and 0 - 2/3 = -0.6667 (= 4/3 x Dr. GRPO)
#   [1,0]:      mean 1/2, std sqrt(1/2), GRPO +-0.7071, Dr. GRPO +-0.5, RLOO +-1 (= 2 x Dr. GRPO)
#   [1,0,1]:    mean 2/3, std sqrt(1/3), GRPO (1/3)/0.5774 = 0.5774 and -1.1547, Dr. GRPO 1/3, -2/3,
#               RLOO 1 - 1/2 = 0.5 and 0 - 1 = -1 (= 3/2 x Dr. GRPO)
#   [1,0,1,0,1,0]: std sqrt(1.5/5) = 0.5477, GRPO +-0.9129, Dr. GRPO +-0.5, RLOO 1 - 2/5 = +-0.6
#   [0.75,0,1,0]: mean 0.4375, Dr. GRPO 0.3125 -0.4375 0.5625 -0.4375, RLOO x 4/3,
#               std sqrt(0.796875/3) = 0.5154, GRPO 0.6063 -0.8489 1.0914 -0.8489
KNOWN = [
    ({}, [1, 0, 1, 0], [0.8660, -0.8660, 0.8660, -0.8660], [0.5, -0.5, 0.5, -0.5],
     [0.6667, -0.6667, 0.6667, -0.6667]),
    ({"G": 2}, [1, 0], [0.7071, -0.7071], [0.5, -0.5], [1.0, -1.0]),
    ({"G": 3}, [1, 0, 1], [0.5774, -1.1547, 0.5774], [0.3333, -0.6667, 0.3333], [0.5, -1.0, 0.5]),
    ({"G": 6}, [1, 0, 1, 0, 1, 0], [0.9129, -0.9129] * 3, [0.5, -0.5] * 3, [0.6, -0.6] * 3),
    ({"r0": 0.75}, [0.75, 0, 1, 0], [0.6063, -0.8489, 1.0914, -0.8489],
     [0.3125, -0.4375, 0.5625, -0.4375], [0.4167, -0.5833, 0.75, -0.5833]),
]


@pytest.mark.parametrize("changes, rewards, grpo, dr, rloo", KNOWN)
def test_group_panel_shows_hand_computed_advantages(changes, rewards, grpo, dr, rloo):
    text, rows, bars = _shown(group_advantage_panel(), **changes)
    assert [row[0] for row in rows] == list(range(len(rewards)))
    assert [row[1] for row in rows] == pytest.approx(rewards)
    for col, expected in zip((2, 3, 4), (grpo, dr, rloo)):
        assert [row[col] for row in rows] == pytest.approx(expected, abs=1e-4)
    for name, expected in zip(METHODS, (grpo, dr, rloo)):
        assert bars[name] == pytest.approx(expected, abs=1e-4)        # the chart shows the table
    assert f"mean = {sum(rewards) / len(rewards):.4f}" in text


def test_group_panel_defaults_show_the_seed_walkthrough():
    text, _, _ = _shown(group_advantage_panel())
    assert "+0.8660" in text and "-0.8660" in text and "std (Bessel) = 0.5774" in text


def test_group_panel_every_slider_moves_end_to_end_and_matches_the_reference():
    p = group_advantage_panel()
    for name, control in p.controls.items():
        for value in control.values():
            text, rows, bars = _shown(p, **{name: value})
            G = p.values["G"]
            rewards = [p.values[f"r{i}"] for i in range(G)]
            assert len(rows) == G and [row[1] for row in rows] == pytest.approx(rewards)
            expected = [ref.group_advantages(rewards, G), ref.dr_grpo_advantages(rewards, G),
                        ref.rloo_advantages(rewards, G)]
            for col, exp, method in zip((2, 3, 4), expected, METHODS):
                assert [row[col] for row in rows] == pytest.approx(exp, abs=1e-4)
                assert bars[method] == pytest.approx(exp, abs=1e-4)
            for row in rows:                            # RLOO = G/(G-1) x Dr. GRPO, every row
                assert row[4] == pytest.approx(G / (G - 1) * row[3], abs=2e-4)


def test_group_panel_all_equal_rewards_say_no_signal():
    text, rows, _ = _shown(group_advantage_panel(), G=5, **{f"r{i}": 0.5 for i in range(6)})
    assert "signal: no" in text
    assert all(row[2:] == [0.0, 0.0, 0.0] for row in rows)


def test_group_panel_greys_out_the_rewards_beyond_G():
    p = group_advantage_panel()
    for G in range(2, 7):
        p.update(G=G)
        assert p.active() == {"G": True, **{f"r{i}": i < G for i in range(6)}}
    p.update(G=3)
    before = p.update()[0]
    assert p.update(r4=0.25, r5=0.75)[0] == before     # an inactive slider changes nothing shown
    box = group_advantage_panel().widget()              # starts from the defaults: G = 4
    sliders = {s.description: s for s in box.children[0].children}
    assert [sliders[f"r{i}"].disabled for i in range(6)] == [False] * 4 + [True] * 2
    sliders["G"].value = 5
    assert [sliders[f"r{i}"].disabled for i in range(6)] == [False] * 5 + [True]
    sliders["G"].value = 2
    assert [sliders[f"r{i}"].disabled for i in range(6)] == [False] * 2 + [True] * 4
    assert not sliders["G"].disabled


@pytest.mark.parametrize("changes, word", [({"G": 9}, "G"), ({"r0": 1.5}, "r0"), ({"r1": "x"}, "r1"),
                                           ({"G": 2.5}, "G"), ({"nope": 1}, "nope")])
def test_panel_rejects_bad_values_naming_the_control(changes, word):
    with pytest.raises(ValueError, match=word):
        group_advantage_panel().update(**changes)


def test_toggle_and_choice_controls_validate_and_enumerate():
    calls = []
    p = panel(lambda flag, mode: calls.append((flag, mode)) or mode,
              flag=Toggle(False), mode=Choice("a", ["a", "b"], active_when=lambda v: v["flag"]))
    assert p.update() == "a" and p.active() == {"flag": True, "mode": False}
    assert p.update(mode="b", flag=True) == "b" and p.active() == {"flag": True, "mode": True}
    assert calls == [(False, "a"), (True, "b")]
    assert p.controls["flag"].values() == [False, True]
    with pytest.raises(ValueError, match="flag"):
        p.update(flag=1)
    with pytest.raises(ValueError, match="mode"):
        p.update(mode="c")


def test_widget_view_re_runs_the_function_when_a_slider_changes():
    calls = []
    p = panel(lambda x: calls.append(x), x=Slider(0.5, 0.0, 1.0, 0.25))
    box = p.widget()
    slider = box.children[0].children[0]
    assert calls == [0.5]                               # rendered once with the default
    slider.value = 0.75
    assert calls == [0.5, 0.75] and p.values["x"] == 0.75


def test_widget_replaces_text_and_figure_in_one_update():
    """The browser must never show the new table next to the old chart: one value change per move,
    holding both the table and the chart."""
    box = group_advantage_panel().widget()
    view = box.children[1]
    changes = []
    view.observe(lambda ch: changes.append(ch["new"]), names="value")
    r0 = next(s for s in box.children[0].children if s.description == "r0")
    r0.value = 0.75
    assert len(changes) == 1
    html = changes[0]
    assert "mean = 0.4375" in html and html.count("<img") == 1 and html.count("<pre") == 1
    assert html.index("<pre") < html.index("<img")      # table above chart, as in the function's tuple
    assert "course-panel-view" in view._dom_classes


def test_to_html_escapes_text_and_embeds_the_figure_at_its_pixel_size():
    fig, ax = plt.subplots(figsize=(2, 1), dpi=100)
    ax.plot([0, 1])
    out = to_html(("a < b & c", None, fig))
    assert out.startswith("<pre") and "a &lt; b &amp; c" in out
    assert not plt.fignum_exists(fig.number)            # closed: no figure leaks per slider move
    src, width, height = re.search(r'src="data:image/png;base64,([^"]+)" width="(\d+)" height="(\d+)"',
                                   out).groups()
    png = base64.b64decode(src)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int(width), int(height)) == (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big"))
    assert 100 <= int(width) <= 300 and 50 <= int(height) <= 200    # about 2 x 1 inch at 100 dpi
    pre = to_html("x")
    assert pre.startswith("<pre") and pre.endswith(">x</pre>")
    # fits the column: the figure shrinks to it, a wide table scrolls, in the code font (offline too)
    assert "max-width: 100%" in out and "height: auto" in out
    assert "overflow-x: auto" in pre and "monospace" in pre


def test_panel_columns_keep_named_controls_together_and_reject_unknown_names():
    p = panel(lambda a, b, c: a + b + c, columns=[("a", "c")], a=Slider(1, 0, 2), b=Slider(1, 0, 2),
              c=Slider(1, 0, 2))
    assert p.columns == [("a", "c")] and p.update(b=2) == 4
    box = p.widget().children[0]                         # the row of controls
    kinds = [type(child).__name__ for child in box.children]
    assert kinds == ["VBox", "FloatSlider"]              # a and c one above the other, then b
    assert [c.description for c in box.children[0].children] == ["a", "c"]
    with pytest.raises(ValueError, match="columns"):
        panel(lambda a: a, columns=[("a", "z")], a=Slider(1, 0, 2))


def test_slider_values_cover_the_range_in_steps():
    assert Slider(2, 2, 6, 1, integer=True).values() == [2, 3, 4, 5, 6]
    assert Slider(0.0, 0.0, 1.0, 0.25).values() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_widget_shows_an_error_in_place_of_the_view():
    def fn(x):
        if x > 0.5:
            raise ValueError("x too large for this view")
        return f"x = {x}"
    box = panel(fn, x=Slider(0.5, 0.0, 1.0, 0.25)).widget()
    view = box.children[1]
    assert "x = 0.5" in view.value
    box.children[0].children[0].value = 0.75            # a callback's traceback would be lost: shown
    assert view.value == "<pre>ValueError: x too large for this view</pre>"


def _every_panel():
    """(name, panel) for every ``*_panel`` factory in course_lib.widgets. Chapter 08's stored runs and
    chapter 12's batch reach only the view, never the controls: stand-ins of the chapter's size."""
    from course_lib.lm.tokens import SIZE
    stand_ins = {
        "gallery_panel": dict(runs={}),
        "token_panel": dict(batch=SimpleNamespace(
            rollout=SimpleNamespace(prompts=[None] * (SIZE["n_prompts"] * SIZE["group_size"])),
            questions=SimpleNamespace(group_size=SIZE["group_size"])), quantities={"entropy (nats)": None})}
    factories = {name: fn for name, fn in vars(widgets).items() if name.endswith("_panel") and inspect.isfunction(fn)}
    assert len(factories) >= 12
    for name, fn in sorted(factories.items()):
        yield name, fn(**stand_ins.get(name, {}))


def _sliders(box):
    import ipywidgets as w
    if isinstance(box, (w.FloatSlider, w.IntSlider)):
        yield box
    for child in getattr(box, "children", ()):
        yield from _sliders(child)


def test_every_slider_of_every_panel_is_wide_enough_that_a_drag_moves_by_single_steps():
    """One width for every slider (not ipywidgets' default 300 px, whose track is 124 px), and no slider
    with more steps than its track has pixels: one pixel of drag is at most one step."""
    found = []
    for name, p in _every_panel():
        box = p.widget()
        plt.close("all")
        for s in _sliders(box):
            steps = round((s.max - s.min) / s.step)
            found.append((name, s.description, steps))
            assert s.layout.width == f"{SLIDER_WIDTH_PX}px", (name, s.description, s.layout.width)
            assert steps <= SLIDER_TRACK_PX, (f"{name}: {s.description} has {steps} steps on a "
                                              f"{SLIDER_TRACK_PX} px track")
    assert len(found) >= 25
    assert max(steps for *_, steps in found) > 124      # the finest slider needs more than the default track


def test_slider_steps_count_the_moves_from_end_to_end():
    assert Slider(1.0, 0.5, 10.0, 0.05).steps == 190 and Slider(4, 2, 6, 1, integer=True).steps == 4
