"""The chapter-cost script's table and README block (the measurement itself is a benchmark, not a test)."""
import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "chapter_costs", Path(__file__).resolve().parents[1] / "benchmarks" / "chapter_costs.py")
costs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(costs)


def test_render_lists_each_chapter_with_time_memory_and_verdict():
    table = costs.render([("01_a.ipynb", {"rc": 0, "wall_s": 12.4, "peak_kb": 307200}),
                          ("02_b.ipynb", {"rc": 1, "wall_s": 3.0, "peak_kb": 102400})])
    assert "| `01_a.ipynb` | 12 s | 300 MB | passes |" in table
    assert "| `02_b.ipynb` | 3 s | 100 MB | FAILS |" in table and "all chapters together 15 s" in table


def test_replace_block_swaps_only_the_marked_table():
    text = f"intro\n{costs.START}\nold\n{costs.END}\nrest \\1"
    assert costs.replace_block(text, "new \\2") == f"intro\n{costs.START}\nnew \\2\n{costs.END}\nrest \\1"
    with pytest.raises(ValueError, match="chapter-costs"):
        costs.replace_block("no markers", "x")


ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = [p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) if costs.header_seconds(p) is not None]


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.name[:2])
def test_each_chapter_header_states_the_readmes_measured_run_time(notebook):
    """One source for a chapter's run time: the README's table (`make costs`); the header copies it."""
    figures = costs.readme_seconds((ROOT / "README.md").read_text())
    assert costs.header_seconds(notebook) == figures[notebook.name]


def test_sync_header_rewrites_only_the_stated_seconds(tmp_path):
    nb = tmp_path / "01_a.ipynb"
    nb.write_text('{"source": ["**Run time.** About 8 s on 2 CPU cores (About 9 s elsewhere)"]}')
    assert costs.sync_header(nb, 6) and costs.header_seconds(nb) == 6
    assert nb.read_text() == '{"source": ["**Run time.** About 6 s on 2 CPU cores (About 9 s elsewhere)"]}'
    assert not costs.sync_header(nb, 6)
