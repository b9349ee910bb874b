"""Chapter 00's map and chapter index are derived from the repository, so they cannot drift."""
import json

import matplotlib.pyplot as plt

from course_lib import plots
from course_lib.display import chapter_index
from course_lib.judge.registry import EXERCISES


def test_every_exercise_appears_on_the_map_exactly_once():
    on_map = [e for _, _, _, chapters in plots.COURSE_PARTS
              for c in chapters for e in plots.exercises_by_chapter().get(c, [])]
    assert sorted(on_map) == sorted(ex[:4] for ex in EXERCISES)


def test_course_map_draws_one_box_per_part_with_its_exercises():
    fig = plots.course_map()
    texts = [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
    assert len(fig.axes[0].patches) == len(plots.COURSE_PARTS)
    assert any("ex09" in t for t in texts) and "chapter 06" in texts


def test_chapter_index_reads_the_first_heading_in_file_order(tmp_path):
    for name, title in (("03_b.ipynb", "# 03 · Bee"), ("01_a.ipynb", "intro\n# 01 · Ay"), ("notes.ipynb", "# x")):
        (tmp_path / name).write_text(json.dumps({"cells": [{"source": [title]}]}))
    assert chapter_index(tmp_path) == [("01_a.ipynb", "01 · Ay"), ("03_b.ipynb", "03 · Bee")]
