"""Chapter 00's map and chapter index are derived from the repository, so they cannot drift."""
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from course_lib import plots
from course_lib.display import chapter_index
from course_lib.judge.registry import EXERCISES


def test_every_exercise_appears_on_the_map_exactly_once():
    on_map = [e for part, _, _ in plots.COURSE_PARTS for e in plots.exercises_by_part()[part]]
    assert sorted(on_map) == sorted(ex[:4] for ex in EXERCISES)


def test_course_map_draws_one_box_per_part_with_its_exercises():
    fig = plots.course_map()
    texts = [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
    assert len(fig.axes[0].patches) == len(plots.COURSE_PARTS)
    assert any("ex09" in t for t in texts) and "chapter 06, 12" in texts


def test_chapter_index_reads_the_first_heading_in_file_order(tmp_path):
    for name, title in (("03_b.ipynb", "# 03 · Bee"), ("01_a.ipynb", "intro\n# 01 · Ay"), ("notes.ipynb", "# x")):
        (tmp_path / name).write_text(json.dumps({"cells": [{"source": [title]}]}))
    assert chapter_index(tmp_path) == [("01_a.ipynb", "01 · Ay"), ("03_b.ipynb", "03 · Bee")]


def test_every_exercise_names_a_part_of_the_map_that_its_chapter_measures():
    parts = {part: chapters for part, _, chapters in plots.COURSE_PARTS}
    for ex in EXERCISES.values():
        assert ex.part in parts, ex.id
        assert ex.chapter[:2] in parts[ex.part], f"{ex.id}: chapter {ex.chapter[:2]} does not measure {ex.part}"
    assert any("09" in chapters for chapters in parts.values())            # the map reaches chapter 09


ROOT = Path(__file__).resolve().parents[1]


def _exercise_section(notebook: Path) -> str:
    cells = ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "markdown"]
    text = "\n".join(cells)
    m = re.search(r"^#+ [\d. ]*Exercises?\b.*?(?=^#+ |\Z)", text, re.M | re.S)
    return m.group(0) if m else ""


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name[:2])
def test_each_chapter_offers_the_exercises_the_catalogue_gives_it(notebook):
    """One source for 'which exercises go with which chapter': the judge's catalogue (an exercise's
    chapter and the chapters that use it). Each chapter's Exercises section names exactly those."""
    nn = notebook.name[:2]
    want = sorted({ex.id[:4] for ex in EXERCISES.values() if ex.chapter[:2] == nn or nn in ex.uses})
    if nn == "00":
        return                              # chapter 00 shows the judge on ex01, it owns no exercise
    assert sorted(set(re.findall(r"\bex\d\d", _exercise_section(notebook)))) == want


def test_readme_chapter_table_lists_the_catalogues_exercises():
    text = (ROOT / "README.md").read_text()
    chapters = text[text.index("## Chapters"):text.index("<!-- chapter-costs:start -->")]
    rows = re.findall(r"^\| `(\d\d)_\w+\.ipynb` \| .* \| ([^|]*) \|$", chapters, re.M)
    assert [nn for nn, _ in rows] == [p.name[:2] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    for nn, cell in rows:
        assert cell.strip() == plots.chapter_exercises(nn), f"README's row for chapter {nn}"


def test_every_chapter_after_the_first_page_is_on_the_map():
    on_map = {ch for _, _, chapters in plots.COURSE_PARTS for ch in chapters}
    present = {name[:2] for name, _ in chapter_index(ROOT / "notebooks")} - {"00"}
    assert present - on_map == set(), f"chapters missing from chapter 00's map: {sorted(present - on_map)}"
