"""Chapters read at 1366 x 768 in JupyterLab with the file browser open: a code line or a printed line
longer than about 100 characters is clipped at the right edge (code) or wraps mid-token (output), and so
does the library source a chapter shows with ``show_source``. Checked here for the chapters listed in
``FITTED``; a chapter joins the list once its lines fit."""
from __future__ import annotations

import json
import operator
import re
from pathlib import Path

import pytest

from course_lib import lm, plots
from course_lib.display import source_lines
from course_lib.lm import sweep, tokens, trl_recipe
from course_lib.lm.lora import AdaptersOff
from course_lib.lm.policy import ChatPolicy
from course_lib.lm.task import random_rewards
from course_lib.rl.loss_step import clip_cannot_bind

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 100                       # characters of the code font in the notebook column at 1366 px
FITTED = ("12_real_model_tokens", "13_grpo_on_a_real_model", "14_the_lineage_on_a_real_model",
          "15_lora_or_full_fine_tuning")
# the names chapters call show_source on
SHOWN = {"tokens": tokens, "lm": lm, "plots": plots, "trl_recipe": trl_recipe, "ChatPolicy": ChatPolicy,
         "random_rewards": random_rewards, "clip_cannot_bind": clip_cannot_bind, "AdaptersOff": AdaptersOff,
         "sweep": sweep}


def _cells(stem: str) -> list[dict]:
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]


def too_long(cells: list[dict], width: int = WIDTH) -> list[tuple[int, str, str]]:
    """(cell, "code" or "output", line) for every visible code line and printed line over ``width``."""
    out = []
    for i, c in enumerate(cells):
        if c["cell_type"] != "code":
            continue
        if not c["metadata"].get("jupyter", {}).get("source_hidden"):
            out += [(i, "code", line) for line in "".join(c["source"]).splitlines() if len(line) > width]
        for o in c.get("outputs", []):
            if o.get("output_type") == "stream":
                out += [(i, "output", line) for line in "".join(o["text"]).splitlines() if len(line) > width]
    return out


@pytest.mark.parametrize("stem", FITTED)
def test_code_and_printed_lines_fit_the_column(stem):
    assert not too_long(_cells(stem)), too_long(_cells(stem))


@pytest.mark.parametrize("stem", FITTED)
def test_the_source_a_chapter_shows_fits_the_column(stem):
    calls = [m for c in _cells(stem) if c["cell_type"] == "code"
             for m in re.findall(r"show_source\(([\w.]+)", "".join(c["source"]))]
    assert calls
    for name in calls:
        head, _, rest = name.partition(".")
        fn = operator.attrgetter(rest)(SHOWN[head]) if rest else SHOWN[head]
        longest = max(source_lines(fn).splitlines(), key=len)
        assert len(longest) <= WIDTH, (name, longest)


def test_the_check_sees_a_long_code_line_and_a_long_printed_line_but_not_a_hidden_cell():
    long = "x" * (WIDTH + 1)
    cells = [{"cell_type": "code", "metadata": {}, "source": [long], "outputs": [
                 {"output_type": "stream", "name": "stdout", "text": ["ok\n", long]}]},
             {"cell_type": "code", "metadata": {"jupyter": {"source_hidden": True}}, "source": [long], "outputs": []},
             {"cell_type": "markdown", "metadata": {}, "source": [long]}]
    assert [(i, kind) for i, kind, _ in too_long(cells)] == [(0, "code"), (0, "output")]
