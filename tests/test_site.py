"""The offline pages' content (no browser needed): what a chapter hides from the reader stays hidden."""
import re
from pathlib import Path

from course_lib import site

ROOT = Path(__file__).resolve().parents[1]


def test_a_verdict_cell_shows_its_rendered_text_once_not_its_source(tmp_path):
    page = site.export(ROOT / "notebooks" / "11_long_answers.ipynb", tmp_path).read_text()
    assert "Verdict" in page                                    # the rendered Markdown
    call = '<span class="n">Markdown</span><span class="p">(</span>'   # the verdict's source, highlighted
    assert call not in page                                     # tagged remove-input: not on the page


def test_the_index_is_set_like_a_chapter_with_a_table_of_the_chapters(tmp_path):
    """The index is exported like the chapters (JupyterLab's stylesheet and fonts), not bare HTML: a
    table with a row per chapter, its number, its title linking to its page, its notebook."""
    names = ("03_loss_aggregation", "05_ratios_and_clipping")
    index = site.write_index([tmp_path / f"{n}.html" for n in names], tmp_path).read_text()
    assert "--jp-content-font-family" in index and "jp-RenderedHTMLCommon" in index
    table = re.search(r'<table class="course-index">(.*?)</table>', index, re.S).group(1)
    rows = re.findall(r"<tr><td>(.*?)</td><td><a href=\"(.*?)\">(.*?)</a></td><td><code>(.*?)</code>", table)
    assert rows == [("03", "03_loss_aggregation.html", "Loss aggregation: how much each token is pushed",
                     "03_loss_aggregation.ipynb"),
                    ("05", "05_ratios_and_clipping.html", "Importance ratios and clipping: PPO, DAPO's "
                     "Clip-Higher, GSPO, CISPO and SAPO", "05_ratios_and_clipping.ipynb")]


def test_a_diff_shows_in_the_code_font_coloured_line_by_line_and_panel_tables_in_code_spacing(tmp_path):
    """Chapter 05's stored diffs: each in the notebook's code font, every removed line red and every added
    line green as Pygments' diff lexer colours them, whatever stylesheet the page has (inline styles); the
    panel's saved table in the code font and line spacing, not the widget's 28 px line."""
    page = site.export(ROOT / "notebooks" / "05_ratios_and_clipping.ipynb", tmp_path).read_text()
    diffs = re.findall(r'<pre class="course-diff" style="([^"]*)">(.*?)</pre>', page, re.S)
    assert len(diffs) >= 8                                      # section 5's and section 11's diffs
    for style, body in diffs:
        assert "var(--jp-code-font-family" in style and "monospace" in style and "line-height" in style
        lines = body.split("\n")
        assert len(lines) > 5
        for line in lines:
            text = re.sub(r"<[^>]+>", "", line)
            color = re.match(r'<span style="color: (#\w+)', line)
            if text.startswith(("---", "+++")):
                continue
            if text.startswith("-"):
                assert color and color.group(1) == "#A00000", line       # Generic.Deleted
            elif text.startswith("+"):
                assert color and color.group(1) == "#008400", line       # Generic.Inserted
            elif text.startswith("@@"):
                assert color and color.group(1) == "#800080", line       # Generic.Subheading
    tables = re.findall(r'<pre style=\\"([^"\\]*)\\">', page)     # in the saved widget state (JSON)
    assert tables and all("--jp-code-line-height" in t and "--jp-code-font-family" in t for t in tables), tables
