"""Chapter 08's run sets and curve readers, and exercise 13's held-out runs."""
import json
from pathlib import Path

import pytest

from course_lib.metrics import check_keys
from course_lib.toy import diagnosis
from course_lib.toy.config import make_config
from course_lib.toy.history import History, load_results

ROOT = Path(__file__).resolve().parents[1]
GALLERY_FILE = ROOT / "notebooks" / "data" / "toy_gallery.json"
HELDOUT_FILE = ROOT / "course_lib" / "judge" / "data" / "toy_diagnosis_heldout.json"


def _hist(values, key="x", start=0):
    return History(config={}, rows=[{"step": start + 2 * i, key: v} for i, v in enumerate(values)])


def test_departure_step_finds_the_first_step_of_a_lasting_departure():
    healthy = [_hist([1.0 + d] * 40) for d in (0.0, 0.01, -0.01)]          # spread 0.02
    same = [_hist([1.0] * 40)]
    later = [_hist([1.0] * 10 + [1.5] * 30)]                                 # away from step 20 on
    spike = [_hist([1.0] * 10 + [1.5] + [1.0] * 29)]                         # one row away
    small = [_hist([1.0] * 10 + [1.05] * 30)]                                # inside 3 x spread
    assert diagnosis.departure_step(same, healthy, "x") is None
    assert diagnosis.departure_step(later, healthy, "x", window=1) == 20
    assert diagnosis.departure_step(later, healthy, "x") == 20              # 0.5 / 5 > 0.06 at once
    assert diagnosis.departure_step(spike, healthy, "x", window=1) is None
    assert diagnosis.departure_step(small, healthy, "x", window=1) is None
    assert diagnosis.departure_step(small, healthy, "x", window=1, k=1.0) == 20
    # the seed mean is what departs: one seed away, one not, averages to half the offset
    assert diagnosis.departure_step(same + later, healthy, "x", window=1) == 20
    with pytest.raises(ValueError, match="runs and healthy"):
        diagnosis.departure_step([], healthy, "x")
    with pytest.raises(ValueError, match="no step"):
        diagnosis.departure_step(later, healthy, "y")


def test_reward_gap_is_reward_minus_exact_accuracy_and_leaves_the_run_alone():
    h = History(config={}, rows=[{"step": 0}, {"step": 1, "reward/mean": 0.5, "acc/sampled": 0.25}])
    g = diagnosis.with_reward_gap(h)
    assert g.series(diagnosis.REWARD_GAP) == ([1], [0.25])
    assert diagnosis.REWARD_GAP not in h.rows[1]


def test_labels_failures_and_monitors_are_consistent():
    assert set(diagnosis.FAILURE) == set(diagnosis.LABELS) - {"healthy"}
    check_keys(k for k, _ in diagnosis.MONITORS)
    check_keys(f.curve for f in diagnosis.FAILURES if f.curve != diagnosis.REWARD_GAP)
    for name in diagnosis.HELDOUT.variants:
        assert diagnosis.true_label(name) in diagnosis.LABELS, name
    held = {diagnosis.true_label(n) for n in diagnosis.HELDOUT.variants}
    assert held == set(diagnosis.LABELS)


def _configs(path):
    raw = json.loads(path.read_text())
    return raw["meta"], {json.dumps(h["config"], sort_keys=True): name
                         for name, hs in raw["runs"].items() for h in hs}


def test_heldout_runs_are_other_runs_than_the_gallery_and_match_their_labels():
    g_meta, gallery = _configs(GALLERY_FILE)
    h_meta, heldout = _configs(HELDOUT_FILE)
    assert not set(gallery) & set(heldout)                     # not one run in both files
    assert not set(g_meta["seeds"]) & set(h_meta["seeds"])     # other seeds
    # other strengths: no held-out misconfiguration is the gallery's own
    bad = {json.dumps(f.bad, sort_keys=True) for f in diagnosis.FAILURES}
    for name, kw in diagnosis.HELDOUT.variants.items():
        if diagnosis.true_label(name) != "healthy":
            assert json.dumps(kw, sort_keys=True) not in bad, name
    _, runs = load_results(HELDOUT_FILE)
    assert list(runs) == list(diagnosis.HELDOUT.variants)
    base = diagnosis.HELDOUT.configs(make_config("smoke"), seed=0, steps=150)
    for name, hists in runs.items():
        want = {k: v for k, v in vars(base[name]).items() if k != "seed"}
        for h in hists:
            assert {k: h.config[k] for k in want if k != "loss"} == \
                {k: v for k, v in want.items() if k != "loss"}, name
            assert h.config["loss"] == want["loss"]
    assert not (ROOT / "notebooks" / "data" / HELDOUT_FILE.name).exists()


# A second rule set, built differently from the reference (medians of thirds, the reward gap per
# token instead of the gap): the judge's bar must let any sensible diagnosis through, not only the
# reference's thresholds.
OTHER_RULES = '''
import statistics


def _third(h, key, which):
    ys = h.series(key)[1]
    n = max(len(ys) // 3, 1)
    return statistics.median(ys[:n] if which == "first" else ys[-n:])


def diagnose(history):
    h = history
    if statistics.median(h.series("mismatch/abs_logratio_p99")[1]) > 1e-3:
        return "stale_sampler"
    if statistics.median(h.series("groups/zero_signal_frac")[1][:5]) > 0.85:
        return "no_signal"
    rows = [r for r in h.rows if "reward/mean" in r]
    per_token = [(r["reward/mean"] - r["acc/sampled"]) / r["len/all"] for r in rows]
    n = max(len(per_token) // 3, 1)
    p0, p1 = statistics.median(per_token[:n]), statistics.median(per_token[-n:])
    if min(p0, p1) > 0.005 and 0.6 < p1 / p0 < 1.6:
        return "length_blowup"            # the gap is a fixed amount per token: a length term
    if p1 > 0.01 and p1 > 3 * max(p0, 0.002):
        return "reward_hacking"
    if _third(h, "kl/ref", "last") > 1.0 and _third(h, "acc/sampled", "last") < 0.1:
        return "kl_runaway"
    if _third(h, "entropy/mean", "last") < 0.2:
        return "entropy_collapse"
    return "healthy"
'''


def test_another_sensible_rule_set_passes_and_a_blind_one_fails(tmp_path):
    from course_lib.judge.registry import EXERCISES
    from course_lib.judge.runner import run_jobs
    ok = tmp_path / "other_rules.py"
    ok.write_text(OTHER_RULES)
    blind = tmp_path / "always_healthy.py"
    blind.write_text("def diagnose(history):\n    return 'healthy'\n")
    jobs = [{"exercise": "ex13_diagnose_runs", "file": str(p), "time_limit": 60, "sample": False}
            for p in (ok, blind)]
    res = {Path(r["file"]).name: r for r in run_jobs(jobs, EXERCISES)}
    assert res["other_rules.py"]["status"] == "passed", res["other_rules.py"]["cases"]
    assert res["always_healthy.py"]["status"] == "failed"
    text = res["always_healthy.py"]["cases"][1]["message"]
    assert "true \\ given" in text and "no_signal" in text           # the confusion table is shown
