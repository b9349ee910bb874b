"""Chapter 11's verdict checks (``toy.long_answers.verdict_checks``) on the two stored sweeps of the
long-answer task: the sweep the chapter reads and the same command's runs made on a second CPU
(notebooks/data/long_second_cpu). Two of the checks are recomputed here from the stored final
accuracies by plain loops, and one is shown to fail on planted data."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from course_lib.toy.long_answers import LONG_COMPARISONS, verdict_checks

DATA = Path(__file__).parent.parent / "notebooks" / "data"
SECOND = DATA / "long_second_cpu"
NAMES = sorted(LONG_COMPARISONS)


def _final_acc(folder: Path, name: str) -> dict:
    """{label: [final held-out accuracy per seed]}, read from the JSON by hand."""
    raw = json.loads((folder / f"toy_{name}.json").read_text())
    out = {}
    for label, hists in raw["runs"].items():
        out[label] = [h["columns"]["acc/heldout"][-1] for h in hists]
    return out


def _beyond_ranges(ref: list, arm: list) -> int:
    """-1 / 0 / +1: the arm's mean below / within / above the reference's, judged against the larger
    of the two seed ranges (chapter 07's rule), by loops."""
    gap = sum(arm) / len(arm) - sum(ref) / len(ref)
    spread = max(max(ref) - min(ref), max(arm) - min(arm))
    return 0 if abs(gap) <= spread else (1 if gap > 0 else -1)


def test_both_sweeps_hold_all_seven_comparisons_made_on_two_cpus():
    cpus = {}
    for folder in (DATA, SECOND):
        for name in NAMES:
            meta = json.loads((folder / f"toy_{name}.json").read_text())["meta"]
            assert meta["comparison"] == name and meta["steps"] == 200
            cpus.setdefault(folder.name, set()).add(meta["environment"]["cpu"])
    assert all(len(c) == 1 for c in cpus.values()) and len(set.union(*cpus.values())) == 2, \
        f"each sweep from one CPU, the two from two: {cpus}"


def test_every_check_holds_on_the_first_sweep_and_four_fail_on_the_second():
    first, second = verdict_checks(DATA), verdict_checks(SECOND)
    assert [t for _, t, _ in first] == [t for _, t, _ in second] and len(first) == 18
    assert all(ok for _, _, ok in first)
    failed = [(s, t) for s, t, ok in second if not ok]
    assert [s for s, _ in failed] == ["2", "4", "5", "8"], failed


@pytest.mark.parametrize("folder", [DATA, SECOND], ids=["first", "second"])
def test_the_advantage_scaling_checks_agree_with_a_loop_over_the_stored_accuracies(folder):
    acc = _final_acc(folder, "long_adv_scaling")
    gs, bs, ns = LONG_COMPARISONS["long_adv_scaling"].variants
    checks = {t: ok for _, t, ok in verdict_checks(folder)}
    assert checks["the batch std ends below the group std, beyond both seed ranges"] == (
        _beyond_ranges(acc[gs], acc[bs]) == -1)
    assert checks["no std ties with the group std"] == (_beyond_ranges(acc[gs], acc[ns]) == 0)


@pytest.mark.parametrize("folder", [DATA, SECOND], ids=["first", "second"])
def test_the_learning_rate_collapse_check_agrees_with_a_loop(folder):
    acc = _final_acc(folder, "long_lr_grid")
    collapsed = all(v < 0.05 for label, vs in acc.items() if label.startswith("lr 0.003") for v in vs)
    assert sum(label.startswith("lr 0.003") for label in acc) == 4
    checks = {t: ok for _, t, ok in verdict_checks(folder)}
    assert checks["at lr 3e-3 every run ends below 0.05 held-out accuracy"] == collapsed


def test_a_planted_gap_flips_the_advantage_scaling_check(tmp_path):
    """Lift the batch std arm's final accuracy on the second sweep far above the group std's: the
    check that reads it must now report no lag (and the loop agrees)."""
    for f in SECOND.glob("toy_long_*.json"):
        shutil.copy(f, tmp_path / f.name)
    path = tmp_path / "toy_long_adv_scaling.json"
    raw = json.loads(path.read_text())
    gs, bs, _ = LONG_COMPARISONS["long_adv_scaling"].variants
    for h in raw["runs"][gs]:
        h["columns"]["acc/heldout"][-1] = 0.9
    for h in raw["runs"][bs]:
        h["columns"]["acc/heldout"][-1] = 0.1
    path.write_text(json.dumps(raw))
    checks = {t: ok for _, t, ok in verdict_checks(tmp_path)}
    assert checks["the batch std ends below the group std, beyond both seed ranges"]
    acc = _final_acc(tmp_path, "long_adv_scaling")
    assert _beyond_ranges(acc[gs], acc[bs]) == -1
