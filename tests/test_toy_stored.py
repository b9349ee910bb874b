"""The stored result files (chapters 07 and 08, exercise 13) match the code that is supposed to have made them.

The chapters' asserts read ``toy_*.json``, so a change to the trainer (or to anything it calls) could
leave them describing another algorithm. Two checks, so that one of them runs on every machine:

- the fingerprint (``toy.fingerprint``): each stored config's first RL steps in float64 after a short
  warm start, stored in the file's ``meta["fingerprints"]`` when the file was made, compared at a
  tolerance far above the spread between float paths and far below any change of algorithm. It runs
  everywhere; a change that alters what a stored comparison does fails here until the file is
  regenerated (``tests/test_toy_stored.py::test_the_fingerprint_catches`` plants such changes);
- the replay: the first steps of each stored seed-0 run in float32, to the 4 significant digits the
  file keeps. A float32 trajectory is chaotic, so it is replayed only where the file's whole
  environment (``history.environment()``: torch build, the CPU's name and identity, float-path variables)
  is this one. Files that predate the CPU's identity replay nowhere; a file made here during the test
  keeps the replay itself tested.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from course_lib import losses
from course_lib.toy import fingerprint as fp
from course_lib.rl.config import RunConfig, make_config
from course_lib.rl.history import config_record, cpu_identity, environment, load_results, replays_here
from course_lib.rl import train

ROOT = Path(__file__).parent.parent
DATA = Path(os.environ.get("COURSE_TOY_DATA", ROOT / "notebooks" / "data"))
# the comparison files, not the runs of one that benchmarks/toy_results.py has not finished (.partial.json)
JUDGE_DATA = ROOT / "course_lib" / "judge" / "data"
# a subfolder of DATA holds a second sweep of the same comparisons (chapter 11's long_second_cpu)
FILES = sorted(p for p in [*DATA.glob("toy_*.json"), *DATA.glob("*/toy_*.json"), *JUDGE_DATA.glob("toy_*.json")]
               if '"runs"' in p.read_text() and not p.name.endswith(".partial.json"))
REPLAY_STEPS = 2                         # stored rows: step 0 (after the warm start), 2, 4, ...


def _regen(path: Path, meta: dict) -> str:
    folder = path.parent.relative_to(ROOT) if path.parent.is_relative_to(ROOT) else path.parent
    out = "" if path.parent == ROOT / "notebooks" / "data" else f" --out {folder}"
    return f"python benchmarks/toy_results.py --only {meta['comparison']}{out}"


def _id(path: Path) -> str:
    """The file's stem, with its folder when it is in a subfolder of DATA (a second sweep)."""
    return path.stem if path.parent in (DATA, JUDGE_DATA) else f"{path.parent.name}/{path.stem}"


def _first_runs():
    for path in FILES:
        meta, runs = load_results(path)
        for label, hists in runs.items():
            yield pytest.param(path, meta, label, hists[0], id=f"{_id(path)}/{label}")


@functools.lru_cache(maxsize=None)
def _fingerprint(config_json: str) -> dict:
    """One fingerprint per config: the two sweeps of a long-task comparison store the same configs."""
    return fp.fingerprint(RunConfig(**json.loads(config_json)))


@pytest.mark.parametrize("path, meta, label, stored", list(_first_runs()))
def test_fingerprint_of_every_stored_run_matches_the_code(path, meta, label, stored):
    want = meta.get("fingerprints", {}).get(label)
    assert want is not None, f"{path.name} / {label}: no fingerprint stored; regenerate: {_regen(path, meta)}"
    assert len(want) >= 40, f"{path.name} / {label}: only {len(want)} values in its fingerprint"
    config = config_record(RunConfig(**stored.config))           # fields added since, at their defaults
    moved = fp.differences(want, _fingerprint(json.dumps(config, sort_keys=True)))
    assert not moved, (f"{path.name} / {label}: the code no longer does what made this file; "
                       f"regenerate it: {_regen(path, meta)}\n  " + "\n  ".join(moved[:8]))


def _sig4(x: float) -> float:
    return float(f"{x:.4g}")


def _replay(path: Path) -> int:
    """Replay the first steps of each seed-0 run stored in ``path`` and compare them with the file's digits ->
    how many values were compared; skips where the file was made in another environment."""
    meta, runs = load_results(path)
    env = meta.get("environment")
    here = environment()
    if not replays_here(env):
        there = {"device": "cpu", **(env or {})}                    # files before the device was recorded: CPU
        differ = {k: f"{there.get(k, 'not recorded')} there, {v} here" for k, v in here.items()
                  if there.get(k) != v}
        pytest.skip(f"{path.name} was made in another environment ({differ}): a float32 run replays "
                    f"digit for digit only where it was made; its fingerprint is checked here")
    compared = 0
    for label, hists in runs.items():
        stored = hists[0]
        before = torch.get_num_threads()
        torch.set_num_threads(meta.get("threads_per_run", 1))
        try:
            rows = train(RunConfig(**stored.config), progress=False, stop_after=REPLAY_STEPS).rows
        finally:
            torch.set_num_threads(before)
        fresh = {r["step"]: r for r in rows}
        for want in stored.rows:
            if want["step"] > REPLAY_STEPS:
                break
            got = fresh[want["step"]]
            for key, v in want.items():
                if key == "step" or key.startswith(fp.NONDETERMINISTIC):
                    continue
                assert key in got, f"{path.name} / {label} step {want['step']}: {key} no longer computed"
                same = (math.isnan(v) and math.isnan(got[key])) or _sig4(got[key]) == v
                assert same, (f"{path.name} / {label} step {want['step']}: {key} stored {v}, the code "
                              f"gives {_sig4(got[key])}; regenerate: {_regen(path, meta)}")
                compared += 1
    return compared


@pytest.mark.parametrize("path", FILES, ids=[_id(p) for p in FILES])
def test_first_steps_of_stored_seed_0_replay_where_the_file_was_made(path):
    compared = _replay(path)
    assert compared >= 15 * len(load_results(path)[1]), f"{path.name}: only {compared} stored values compared"


def test_a_file_made_on_this_machine_replays_here_and_not_on_a_cpu_one_flag_apart(tmp_path):
    """A short file made here by the command that makes the stored ones (2 steps, seed 0): it replays, a value
    changed in it fails the replay, and the same file marked as made on a CPU with one more flag is skipped."""
    if not cpu_identity():
        pytest.skip("this machine's CPU identity cannot be read: nothing replays here")
    spec = importlib.util.spec_from_file_location("toy_results", ROOT / "benchmarks" / "toy_results.py")
    toy_results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy_results)
    toy_results.main(["--only", "aggregation", "--steps", "2", "--seeds", "0", "--workers", "1",
                      "--out", str(tmp_path)])
    path = tmp_path / "toy_aggregation.json"
    assert _replay(path) >= 15 * 2
    raw = json.loads(path.read_text())
    columns = raw["runs"]["token-mean"][0]["columns"]
    columns["grad/norm"][1] = _sig4(columns["grad/norm"][1] * 1.01)
    path.write_text(json.dumps(raw))
    with pytest.raises(AssertionError, match="grad/norm stored"):
        _replay(path)
    raw["meta"]["environment"]["cpu_id"]["flags"].append("amx_fp16")
    path.write_text(json.dumps(raw))
    with pytest.raises(pytest.skip.Exception, match="cpu_id"):
        _replay(path)


def test_every_comparison_has_a_stored_file():
    from course_lib.toy.experiments import COMPARISONS
    assert {p.stem.removeprefix("toy_") for p in FILES} >= set(COMPARISONS)


# ---- the fingerprint is portable, and it sees a change of algorithm -----------------------------
BASE = make_config("smoke", steps=200)


def test_fingerprint_is_the_same_run_twice_and_covers_every_step():
    a, b = fp.fingerprint(BASE), fp.fingerprint(BASE)
    assert fp.differences(a, b, rtol=0, atol=0) == []
    assert {k.split("/", 1)[0] for k in a} == {"0", "1", "2"}
    assert {"1/loss/policy", "2/grad/norm", "2/lr", "0/acc/heldout", "2/kl/ref"} <= set(a)


def test_differences_reports_moved_missing_and_new_values():
    stored = {"1/a": 1.0, "1/b": 2.0, "1/c": float("nan")}
    assert fp.differences(stored, {"1/a": 1.0 + 1e-9, "1/b": 2.0, "1/c": float("nan")}) == []
    moved = fp.differences(stored, {"1/a": 1.001, "1/c": 0.0, "2/c": 3.0, "1/new": 4.0})
    assert [m.split(":")[0] for m in moved] == ["1/a", "1/b", "1/c", "2/c"]   # a metric added later: not reported


def _flipped_grpo(logp, old_logp, adv, mask, **kw):
    return losses.grpo_loss(logp, old_logp, -adv, mask, **kw)


PLANTED = {   # what a wrong trainer would do to a config, expressed as the config it would then run
    "a loss knob ignored (eps_high 0.28 run as the default 0.2)":
        (replace(BASE, loss="dapo", eps_high=0.28, minibatches=4), replace(BASE, loss="dapo", eps_high=0.2, minibatches=4)),
    "pi_old from the sampler instead of the learner's recompute":
        (replace(BASE, mismatch="noise", minibatches=2), replace(BASE, mismatch="noise", minibatches=2,
                                                                old_logp_source="sampler")),
    "the advantage's sign flipped":
        (BASE, replace(BASE, loss=_flipped_grpo)),
    "a constant learning rate instead of the cosine schedule":
        (replace(BASE, lr_schedule="cosine", warmup_steps=1), replace(BASE, lr_schedule="constant", warmup_steps=1)),
}


@pytest.mark.parametrize("name", PLANTED)
def test_the_fingerprint_catches(name):
    right, wrong = PLANTED[name]
    assert fp.differences(fp.fingerprint(right), fp.fingerprint(wrong)), f"{name}: fingerprint unchanged"


def test_the_fingerprint_of_a_run_with_changes_covers_the_changed_knobs():
    late = replace(BASE, changes={150: {"lr": 5e-3, "mismatch": "stale", "stale_steps": 2}})
    other = replace(BASE, changes={150: {"lr": 4e-3, "mismatch": "stale", "stale_steps": 2}})
    a, base = fp.fingerprint(late), fp.fingerprint(BASE)
    assert fp.differences(base, a) and fp.differences(a, fp.fingerprint(other))
    assert {k: v for k, v in a.items() if k.startswith(("0/", "1/"))} == \
        {k: v for k, v in base.items() if k.startswith(("0/", "1/"))}          # before the change: the base run
