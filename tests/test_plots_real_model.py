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
