"""Chapter 12's token view: every token stays readable on its colour, whatever the quantity and value."""
import re

import pytest
from matplotlib.colors import to_rgb

from course_lib.plots.real_model import TOKEN_SCALES, TokenView, contrast


def test_contrast_matches_the_wcag_reference_points():
    assert contrast((0, 0, 0), (1, 1, 1)) == pytest.approx(21.0)
    assert contrast((1, 1, 1), (1, 1, 1)) == pytest.approx(1.0)
    assert contrast(to_rgb("#777777"), (1, 1, 1)) == pytest.approx(4.48, abs=0.01)   # WCAG's usual example


@pytest.mark.parametrize("quantity", list(TOKEN_SCALES))
def test_every_token_has_text_at_least_4_5_to_1_against_its_background(quantity):
    _, lo, hi, _ = TOKEN_SCALES[quantity]
    values = [lo - 1 + (hi - lo + 2) * i / 200 for i in range(201)]          # past both ends too
    page = TokenView([f"t{i}" for i in range(len(values))], values, quantity)._repr_html_()
    spans = re.findall(r'background:(#[0-9a-f]{6});color:(black|white);', page)
    assert len(spans) == len(values)
    worst = min(contrast(to_rgb(bg), to_rgb(fg)) for bg, fg in spans)
    assert worst >= 4.5, f"{quantity}: a token's text has contrast {worst:.2f}:1 with its background"


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="quantity='ratio'"):
        TokenView(["a"], [1.0], "ratio")
    with pytest.raises(ValueError, match="2 tokens but 1 values"):
        TokenView(["a", "b"], [1.0], "log-prob")


# ---- chapter 12's figures -------------------------------------------------------------------------

def _ratio_row(lo, hi):
    return {"q01": lo, "q05": lo + 0.03, "q50": 1.0, "q95": hi - 0.03, "q99": hi, "min": lo - 0.05, "max": hi + 0.3}


def test_the_ratio_spread_reads_plain_decimals_near_1():
    import matplotlib.pyplot as plt

    from course_lib.plots.real_model import ratio_spread_plot
    fig = ratio_spread_plot({"bf16": _ratio_row(0.85, 1.13), "bf16 + fp32 head": _ratio_row(0.87, 1.12)}, "t")
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert {"0.8", "0.9", "1.0", "1.1", "1.2"} <= set(labels), labels
    assert not any("10^" in x or "$" in x for x in labels)
    assert not any(t.get_text() for t in ax.get_xticklabels(minor=True))
    plt.close(fig)


def _step(live_tokens, grpo, gspo):
    return {"n_live_tokens": live_tokens, "n_live_replies": 12, "clip_frac_0.2_live": grpo,
            "clip_frac_0.28_live": grpo * 0.8, "gspo_tok_clip_frac_live": gspo}


def test_the_clip_plot_names_its_base_and_each_clip_once():
    import matplotlib.pyplot as plt

    from course_lib.plots.real_model import clip_by_lr_plot
    steps = {"1e-06": _step(400, 0.001, 1.0), "1e-05": _step(400, 0.06, 1.0)}
    fig = clip_by_lr_plot(steps, held_back={k: _step(400, v["clip_frac_0.2_live"] / 2, 0.5) for k, v in steps.items()})
    left, right = fig.axes
    assert "400 tokens in 12 replies with A != 0" in left.get_title() and "held-back" in right.get_title()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(labels) == len(set(labels)) == 3 and any("GSPO" in x for x in labels)
    assert [round(y, 6) for y in left.lines[2].get_ydata()] == [100.0, 100.0]       # GSPO, in percent
    width, _ = fig.get_size_inches() * fig.dpi
    assert width <= 880                     # the notebook column at 1366 px with the file browser open
    plt.close(fig)


def test_the_entropy_plot_has_one_legend_entry_per_series_and_per_seed():
    import matplotlib.pyplot as plt

    from course_lib.plots.real_model import entropy_by_temperature_plot
    by_t = {"0.3": {"share_above": 0.2}, "1": {"share_above": 0.8}}
    series = {"sampled at T (32 replies)": {s: by_t for s in ("0", "1", "2")},
              "re-tempered (16 replies)": {s: by_t for s in ("0", "1", "2")}}
    fig = entropy_by_temperature_plot(series, 0.672)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == len(set(labels)) == 6, labels
    assert {"seed 0", "seed 1", "seed 2", "sampled at T (32 replies)"} <= set(labels)
    markers = {line.get_marker() for line in fig.axes[0].lines} - {"None"}
    assert len(markers) == 3                                   # the seeds are told apart
    plt.close(fig)
