"""Chapter 09's panel: every control moves, and the table it prints is the library's weights."""
import matplotlib.pyplot as plt
import pytest
import torch

from course_lib import aggregation
from course_lib import frameworks as fw
from course_lib.widgets import normaliser_panel


def _parse(text):
    """{normaliser label: ([per-token weight per response], sum)} from the panel's table."""
    out = {}
    for line in text.splitlines()[3:]:
        label = next(n.label for n in fw.NORMALISERS if line.strip().startswith(n.label + " "))
        cells = line.strip()[len(label):].split()
        per_tok = [float(c) / 1e3 for c in cells[0:-1:2]]
        out[label] = (per_tok, float(cells[-1]))
    return out


def _check(p, text, fig):
    v = p.values
    L = max(v["max_len"], v["long_len"])
    lengths = [2, 4, 6, v["long_len"]]
    rows = _parse(text)
    assert len(rows) == len(fw.NORMALISERS)
    n_tok = sum(lengths)
    # by hand: token mean 1/N; GRPO 1/(B |y_i|); Dr. GRPO 1/(B L); bnpo per micro-batch
    assert rows["TRL dapo"][0] == pytest.approx([1 / n_tok] * 4, abs=6e-6)
    assert rows["TRL grpo"][0] == pytest.approx([1 / (4 * n) for n in lengths], abs=6e-6)
    assert rows["TRL dr_grpo"][0] == pytest.approx([1 / (4 * L)] * 4, abs=6e-6)
    assert rows["TRL dr_grpo"][1] == pytest.approx(n_tok / (4 * L), abs=6e-4)
    M = v["micro_batches"]
    parts = [lengths[i * 4 // M:(i + 1) * 4 // M] for i in range(M)]
    bnpo = [1 / (sum(part) * M) for part in parts for _ in part]
    assert rows["TRL bnpo"][0] == pytest.approx(bnpo, abs=6e-6)
    for label in ("TRL dapo", "TRL grpo", "TRL bnpo"):
        assert rows[label][1] == pytest.approx(1.0, abs=6e-4)
    assert len(fig.axes) == 2 and len(fig.axes[0].patches) == 4 * len(fw.NORMALISERS)
    plt.close(fig)


def test_default_state_shows_grpo_favouring_the_short_response():
    p = normaliser_panel()
    text, fig = p.update()
    _check(p, text, fig)
    mask = torch.arange(12)[None, :] < torch.tensor([2, 4, 6, 12])[:, None]
    w = aggregation.token_weights(mask, "seq-mean-token-mean")
    grpo_row = next(line for line in text.splitlines() if line.strip().startswith("TRL grpo "))
    assert f"{1e3 * float(w[0, 0]):.2f}" in grpo_row                             # 125.00


@pytest.mark.parametrize("name", ["long_len", "max_len", "micro_batches"])
def test_every_control_moves_end_to_end(name):
    p = normaliser_panel()
    for value in p.controls[name].values():
        text, fig = p.update(**{name: value})
        _check(p, text, fig)
