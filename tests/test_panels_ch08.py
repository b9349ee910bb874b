"""Chapter 08's gallery panel, moved end to end without a browser, against the stored runs."""
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from course_lib.toy import diagnosis
from course_lib.rl.history import load_results
from course_lib.widgets import gallery_panel

DATA = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "toy_gallery.json"


@pytest.fixture(scope="module")
def panel():
    _, runs = load_results(DATA)
    return gallery_panel({n: [diagnosis.with_reward_gap(h) for h in hs] for n, hs in runs.items()})


def test_every_control_moves_and_the_plot_shows_healthy_failure_and_fixes(panel):
    for name, control in panel.controls.items():
        for value in control.values():
            text, fig = panel.update(**{name: value})
            f = diagnosis.FAILURE[panel.values["failure"]]
            n_runs = 2 + len(f.fixes or {})
            assert len(fig.axes) == 1 and len(fig.axes[0].lines) == n_runs * 4 + 1    # 3 seeds + mean each, onset
            assert f.cause in text and panel.values["monitor"] in text
            assert f"from step {diagnosis.ONSETS[f.label]}" in text
            plt.close(fig)


def test_the_panel_reports_each_seeds_departure_step_of_section_2(panel):
    cases = {("stale_sampler", "mismatch/abs_logratio_p99"): "at step 72 / 72 / 72 (seeds 0 / 1 / 2",
             ("kl_runaway", "kl/ref"): "at step 60 / 70 / 60",
             ("reward_hacking", "reward/mean"): "at step - / - / -",
             ("low_temperature", "entropy/t1"): "at step 136 / 134 / 154"}
    for (failure, monitor), want in cases.items():
        text, fig = panel.update(failure=failure, monitor=monitor, smooth=3)
        plt.close(fig)
        assert want in text, (failure, monitor, text)
    text, fig = panel.update(failure="kl_runaway", monitor="kl/ref")
    plt.close(fig)
    assert "lr 5e-3 + KL 0.3" in text and "3.33 / 5.96 / 6.82" in text          # per-seed ends of the run
    with pytest.raises(ValueError, match="failure must be one of"):
        panel.update(failure="healthy")
