"""Each chapter that teaches a monitor names what verl and TRL log it as, with the names in
course_lib.frameworks.METRICS (which tests/peers and test_frameworks.py check against the installed
frameworks), so a renamed metric fails here rather than going stale in the prose."""
import json
from pathlib import Path

import pytest

from course_lib import frameworks as fw

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# monitor -> the chapters that teach it (chapter 08 also prints every name in its monitor table)
WHERE = {"Clip fraction": ("01", "05"), "KL to the reference": ("01", "04"), "Entropy": ("01", "05", "08"),
         "Response length": ("03",), "Groups without signal": ("02", "08"), "Gradient norm": ("01", "03", "08"),
         "Sampler/learner ratio": ("06",), "Reward": ("08",), "Truncated responses": ("08",)}


def prose(chapter: str) -> str:
    path = next(NOTEBOOKS.glob(f"{chapter}_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_every_monitor_of_the_framework_table_has_a_chapter_that_names_it():
    assert sorted(WHERE) == sorted(m.concept for m in fw.METRICS)


@pytest.mark.parametrize("monitor", [m for m in fw.METRICS], ids=lambda m: m.concept)
def test_chapter_prose_gives_verl_and_trl_names_of_each_monitor(monitor):
    for chapter in WHERE[monitor.concept]:
        text = prose(chapter)
        missing = [f"{framework} {name}" for framework in ("verl", "TRL")
                   for name in monitor.settings()[framework] if f"`{name}`" not in text]
        assert not missing, f"chapter {chapter}, {monitor.concept}: {missing}"
