"""Chapter 08's gallery panel, moved end to end without a browser, against the stored runs."""
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from course_lib.toy import diagnosis
from course_lib.toy.history import load_results
from course_lib.widgets import gallery_panel

DATA = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "toy_gallery.json"


@pytest.fixture(scope="module")
def panel():
    _, runs = load_results(DATA)
    return gallery_panel({n: [diagnosis.with_reward_gap(h) for h in hs] for n, hs in runs.items()})


def test_every_control_moves_and_the_plot_shows_healthy_failure_and_fix(panel):
    for name, control in panel.controls.items():
        for value in control.values():
            text, fig = panel.update(**{name: value})
            f = diagnosis.FAILURE[panel.values["failure"]]
            n_runs = 3 if f.fix is not None else 2
            assert len(fig.axes) == 1 and len(fig.axes[0].lines) == n_runs * 4     # 3 seeds + mean each
            assert f.cause in text and panel.values["monitor"] in text
            plt.close(fig)


def test_the_panel_reports_the_departure_steps_of_section_2(panel):
    cases = {("stale_sampler", "mismatch/abs_logratio_p99"): "leaves the healthy band at step 2",
             ("kl_runaway", "kl/ref"): "leaves the healthy band at step 6",
             ("reward_hacking", "reward/mean"): "stays inside the healthy band",
             ("no_signal", "len/correct"): "too few to tell"}
    for (failure, monitor), want in cases.items():
        text, fig = panel.update(failure=failure, monitor=monitor, smooth=3)
        plt.close(fig)
        assert want in text, (failure, monitor, text)
    text, fig = panel.update(failure="stale_sampler", monitor="mismatch/abs_logratio_p99")
    plt.close(fig)
    assert "stale 4 + TIS" in text and "3.51 / 9.71 / 3.2" in text          # per-seed ends of the run
    with pytest.raises(ValueError, match="failure must be one of"):
        panel.update(failure="healthy")
