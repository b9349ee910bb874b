"""The offline pages' content (no browser needed): what a chapter hides from the reader stays hidden."""
from pathlib import Path

from course_lib import site

ROOT = Path(__file__).resolve().parents[1]


def test_a_verdict_cell_shows_its_rendered_text_once_not_its_source(tmp_path):
    page = site.export(ROOT / "notebooks" / "11_long_answers.ipynb", tmp_path).read_text()
    assert "Verdict" in page                                    # the rendered Markdown
    call = '<span class="n">Markdown</span><span class="p">(</span>'   # the verdict's source, highlighted
    assert call not in page                                     # tagged remove-input: not on the page
