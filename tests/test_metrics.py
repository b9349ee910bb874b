"""course_lib.metrics: the glossary renders as a markdown table with every definition whole."""
import re

import pytest

from course_lib import metrics
from course_lib.metrics import METRICS, glossary_markdown

UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def _cells(row: str) -> list[str]:
    """The cells of one GFM table row: split on pipes not preceded by a backslash."""
    parts = UNESCAPED_PIPE.split(row.strip())
    assert parts[0] == "" and parts[-1] == "", f"row must start and end with a pipe: {row!r}"
    return [p.strip().replace("\\|", "|") for p in parts[1:-1]]


def test_every_glossary_row_has_two_cells_and_the_whole_definition():
    lines = glossary_markdown().splitlines()
    assert _cells(lines[0]) == ["key", "definition"] and _cells(lines[1]) == ["---", "---"]
    rows = [_cells(line) for line in lines[2:]]
    assert [key for key, _ in rows] == [f"`{k}`" for k in METRICS]
    for (key, definition), k in zip(rows, METRICS):
        assert definition == METRICS[k], k
    # the row that broke the table: KL(pi_theta || pi_ref) holds two pipes
    assert any("|" in text for text in METRICS.values())


def test_glossary_of_chosen_keys_keeps_their_order_and_rejects_unknown_keys():
    keys = ["kl/ref", "lr", "clip/low_frac"]
    rows = [_cells(line) for line in glossary_markdown(keys).splitlines()[2:]]
    assert rows == [[f"`{k}`", METRICS[k]] for k in keys]
    with pytest.raises(KeyError, match="no/such_key"):
        glossary_markdown(["lr", "no/such_key"])


def test_a_markdown_renderer_sees_every_definition_whole():
    """The same check through mistune (nbconvert's markdown parser) with its GFM table plugin."""
    mistune = pytest.importorskip("mistune")
    parse = mistune.create_markdown(renderer=None, plugins=["table"])
    (table,) = parse(glossary_markdown())
    body = [part for part in table["children"] if part["type"] == "table_body"][0]
    rendered = []
    for row in body["children"]:
        key_cell, definition_cell = row["children"]              # exactly two cells per row
        rendered.append(("".join(c["raw"] for c in key_cell["children"]),
                         "".join(c["raw"] for c in definition_cell["children"])))
    assert rendered == list(METRICS.items())


def test_clip_fraction_definitions_do_not_say_clipped_tokens_get_no_gradient_under_every_loss():
    # CISPO keeps a gradient on clipped tokens (weighted by the clipped ratio)
    for key in ("clip/low_frac", "clip/high_frac"):
        assert "CISPO" in METRICS[key], key


def test_check_keys_names_every_unknown_key():
    metrics.check_keys(["lr", "kl/ref"])
    with pytest.raises(KeyError, match=r"\['a/b', 'c/d'\]"):
        metrics.check_keys(["lr", "c/d", "a/b"])
