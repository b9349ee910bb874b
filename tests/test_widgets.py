"""Slider panels work without a browser: every control of every chapter panel can be moved."""
import matplotlib.pyplot as plt
import pytest
import torch

from course_lib import advantages
from course_lib.widgets import Choice, Slider, Toggle, group_advantage_panel, panel


def _rows(text: str) -> list[list[float]]:
    """Parse the data rows of the panel's table: i, reward, GRPO, Dr. GRPO, RLOO."""
    lines = text.splitlines()[3:]                      # head line, header, rule
    return [[float(x) for x in line.split()] for line in lines]


def _check_view(p, result):
    text, fig = result
    G = p.values["G"]
    rewards = torch.tensor([p.values[f"r{i}"] for i in range(G)])
    rows = _rows(text)
    assert len(rows) == G
    expected = [advantages.group_advantages(rewards, G), advantages.dr_grpo_advantages(rewards, G),
                advantages.rloo_advantages(rewards, G)]
    for i, row in enumerate(rows):
        assert row[1] == pytest.approx(float(rewards[i]), abs=5e-3)
        for col, adv in zip(row[2:], expected):
            assert col == pytest.approx(float(adv[i]), abs=1e-4)
    assert isinstance(fig, plt.Figure) and len(fig.axes[0].patches) == 3 * G
    plt.close(fig)


def test_group_panel_defaults_show_the_seed_walkthrough():
    p = group_advantage_panel()
    text, fig = p.update()
    plt.close(fig)
    assert "+0.8660" in text and "-0.8660" in text and "std (Bessel) = 0.5774" in text


def test_group_panel_every_slider_moves_end_to_end_and_matches_the_library():
    p = group_advantage_panel()
    for name, control in p.controls.items():
        for value in control.values():
            _check_view(p, p.update(**{name: value}))


def test_group_panel_all_equal_rewards_say_no_signal():
    p = group_advantage_panel()
    text, fig = p.update(G=5, **{f"r{i}": 0.5 for i in range(6)})
    plt.close(fig)
    assert "signal: no" in text
    assert all(row[2:] == [0.0, 0.0, 0.0] for row in _rows(text))


@pytest.mark.parametrize("changes, word", [({"G": 9}, "G"), ({"r0": 1.5}, "r0"), ({"r1": "x"}, "r1"),
                                           ({"G": 2.5}, "G"), ({"nope": 1}, "nope")])
def test_panel_rejects_bad_values_naming_the_control(changes, word):
    with pytest.raises(ValueError, match=word):
        group_advantage_panel().update(**changes)


def test_toggle_and_choice_controls_validate_and_enumerate():
    calls = []
    p = panel(lambda flag, mode: calls.append((flag, mode)) or mode,
              flag=Toggle(False), mode=Choice("a", ["a", "b"]))
    assert p.update() == "a" and p.update(mode="b", flag=True) == "b"
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


def test_slider_values_cover_the_range_in_steps():
    assert Slider(2, 2, 6, 1, integer=True).values() == [2, 3, 4, 5, 6]
    assert Slider(0.0, 0.0, 1.0, 0.25).values() == [0.0, 0.25, 0.5, 0.75, 1.0]
