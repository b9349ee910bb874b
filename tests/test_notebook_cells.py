"""No notebook cell defines a function or a class: course code lives in course_lib, by topic, where it
is tested and shown with show_source. Read from each code cell's AST (IPython magics and shell lines
left out); a function bound to a name with ``lambda`` counts as a definition too."""
from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# named lambdas still in chapters that have not been moved to course_lib yet: (notebook, name). The
# list may only shrink: a new one fails, and so does one that is gone but still listed.
NAMED_LAMBDAS_LEFT = {
    ("05_ratios_and_clipping", "c"), ("05_ratios_and_clipping", "w"), ("05_ratios_and_clipping", "top"),
    ("05_ratios_and_clipping", "last_kept"), ("06_train_inference_mismatch", "per_seed"),
    ("06_train_inference_mismatch", "seeds"), ("09_from_toy_to_production", "noise"),
    ("09_from_toy_to_production", "fmt"), ("09_from_toy_to_production", "same_call"),
    ("10_splitting_the_batch", "clip"), ("10_splitting_the_batch", "rel"), ("11_long_answers", "mean"),
}


def definitions(source: str) -> list[tuple[str, str]]:
    """(kind, name) of every def, class and name = lambda in one cell's source."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(("class" if isinstance(node, ast.ClassDef) else "def", node.name))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Lambda):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [("lambda", ast.unparse(t)) for t in targets]
    return out


def notebook_definitions(path: Path) -> list[tuple[int, str, str]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(i, kind, name) for i, c in enumerate(cells) if c["cell_type"] == "code"
            for kind, name in definitions("".join(c["source"]))]


def test_no_notebook_cell_defines_a_function_or_a_class():
    assert len(NOTEBOOKS) >= 12
    found = {p.stem: [(i, k, n) for i, k, n in notebook_definitions(p) if k != "lambda"] for p in NOTEBOOKS}
    assert not any(found.values()), {nb: d for nb, d in found.items() if d}


def test_no_notebook_binds_a_new_lambda_to_a_name():
    found = {(p.stem, n) for p in NOTEBOOKS for _, k, n in notebook_definitions(p) if k == "lambda"}
    assert not found - NAMED_LAMBDAS_LEFT, f"move these to course_lib: {sorted(found - NAMED_LAMBDAS_LEFT)}"
    assert not NAMED_LAMBDAS_LEFT - found, f"gone, drop them from the list: {sorted(NAMED_LAMBDAS_LEFT - found)}"


def test_the_reader_finds_each_kind_of_definition():
    src = "%matplotlib inline\ndef f():\n    pass\nclass C:\n    pass\ng = lambda x: x\nh = max\n"
    assert definitions(src) == [("def", "f"), ("class", "C"), ("lambda", "g")]


def test_test_markers_are_cell_tags_not_source_the_reader_reads():
    """nbval reads its markers from cell tags as well as from comments; in a tag the reader never sees them."""
    found = [(p.stem, i) for p in NOTEBOOKS for i, c in enumerate(json.loads(p.read_text(encoding="utf-8"))["cells"])
             if c["cell_type"] == "code" and "NBVAL_" in "".join(c["source"]).upper()]
    assert not found, f"use the cell tag (nbval-ignore-output, nbval-skip, ...) instead: {found}"


def test_no_cell_has_an_invalid_escape():
    """'\\s' in a plain string (LaTeX in an f-string that is not raw) warns in the reader's notebook."""
    for p in NOTEBOOKS:
        for i, c in enumerate(json.loads(p.read_text(encoding="utf-8"))["cells"]):
            if c["cell_type"] == "code":
                code = "\n".join(line for line in "".join(c["source"]).splitlines()
                                 if not line.lstrip().startswith(("%", "!")))
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    try:
                        ast.parse(code)
                    except (SyntaxError, DeprecationWarning, SyntaxWarning) as err:
                        raise AssertionError(f"{p.stem} cell {i}: {err}") from None


def test_a_cell_whose_input_the_page_removes_is_collapsed_in_lab_too():
    """A verdict cell shows its rendered text only: tagged remove-input for the static pages, and its source
    collapsed (jupyter.source_hidden) for a reader in JupyterLab, who would otherwise read it twice."""
    mismatched = []
    for path in NOTEBOOKS:
        for i, c in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            md = c.get("metadata", {})
            if ("remove-input" in md.get("tags", [])) != bool(md.get("jupyter", {}).get("source_hidden")):
                mismatched.append(f"{path.stem} cell {i}")
    assert not mismatched, mismatched
