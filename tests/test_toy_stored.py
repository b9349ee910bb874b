"""Chapter 07's stored result files match the code that is supposed to have made them.

The notebook's asserts read notebooks/data/toy_*.json, so a change to the trainer (or to anything
it calls) could leave them describing a different algorithm. This test re-runs the first two steps
of every stored comparison's seed 0 (one thread, deterministic) and checks every stored metric
except wall times against the stored rows, to the 4 significant digits they keep: a change that
alters a comparison fails here until its file is regenerated.

Float results depend on the PyTorch version and the CPU's kernels (AVX2 vs AVX512), so a file
that records the environment it was made in (``meta["environment"]``, ``history.environment()``)
is only re-run in that environment; elsewhere the test is skipped and says why.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from course_lib.toy.config import ToyConfig
from course_lib.toy.history import environment, load_results
from course_lib.toy.trainer import train

DATA = Path(os.environ.get("COURSE_TOY_DATA", Path(__file__).parent.parent / "notebooks" / "data"))
FILES = sorted(p for p in DATA.glob("toy_*.json") if '"runs"' in p.read_text())   # comparison files
STEPS = 2                                # stored rows: step 0 (after the warm start), 2, 4, ...
NONDETERMINISTIC = ("time/", "speed/")   # wall-clock keys; every other metric is a function of the config


def _runs():
    for path in FILES:
        meta, runs = load_results(path)
        for label, hists in runs.items():
            yield pytest.param(path, meta, label, hists[0], id=f"{path.stem}/{label}")


def _sig4(x: float) -> float:
    return float(f"{x:.4g}")


@pytest.mark.parametrize("path, meta, label, stored", list(_runs()))
def test_first_steps_of_stored_seed_0_match_the_code(path, meta, label, stored):
    env = meta.get("environment")
    if env is not None and env != environment():
        pytest.skip(f"{path.name} was made with {env}; this is {environment()}: float results differ")
    cfg = ToyConfig(**stored.config)
    assert cfg.seed == 0
    before = torch.get_num_threads()
    torch.set_num_threads(meta.get("threads_per_run", 1))
    try:
        rows = train(cfg, progress=False, stop_after=STEPS).rows
    finally:
        torch.set_num_threads(before)
    fresh = {r["step"]: r for r in rows}
    regen = f"python benchmarks/toy_results.py --only {meta['comparison']}"
    compared = 0
    for want in stored.rows:
        if want["step"] > STEPS:
            break
        got = fresh[want["step"]]
        for key, v in want.items():
            if key == "step" or key.startswith(NONDETERMINISTIC):
                continue
            assert key in got, f"{path.name} / {label} step {want['step']}: {key} no longer computed"
            same = (math.isnan(v) and math.isnan(got[key])) or _sig4(got[key]) == v
            assert same, (f"{path.name} / {label} step {want['step']}: {key} stored {v}, the code gives "
                          f"{_sig4(got[key])}; the stored results no longer match the code: {regen}")
            compared += 1
    assert compared >= 15, f"{path.name} / {label}: only {compared} stored values compared"


def test_every_comparison_has_a_stored_file():
    from course_lib.toy.experiments import COMPARISONS
    assert {p.stem.removeprefix("toy_") for p in FILES} >= set(COMPARISONS)
