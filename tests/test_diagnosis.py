"""Chapter 08's run sets and curve readers, and exercise 13's held-out runs."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from course_lib.metrics import check_keys
from course_lib.toy import diagnosis
from course_lib.rl.config import RunConfig, make_config
from course_lib.rl.history import History, config_record, load_results

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


def test_departures_compare_each_seed_with_the_healthy_run_of_the_same_seed():
    healthy = [_hist([1.0 + d] * 40) for d in (0.0, 0.01, -0.01)]          # spread 0.02 between seeds
    twins = [_hist([1.0 + d] * 25 + [1.5 + d] * 15) for d in (0.0, 0.01, -0.01)]   # away from step 50
    mixed = [twins[0], healthy[1], _hist([0.99] * 40)]                       # seed 2 off by 0.01 only
    assert diagnosis.departures(twins, healthy, "x", window=1) == [50, 50, 50]
    assert diagnosis.departures(mixed, healthy, "x", window=1) == [50, None, None]
    with pytest.raises(ValueError, match="one healthy run per seed"):
        diagnosis.departures(twins[:2], healthy, "x")


def test_labels_failures_and_monitors_are_consistent():
    assert set(diagnosis.FAILURE) == set(diagnosis.LABELS) - {"healthy"}
    check_keys(k for k, _ in diagnosis.MONITORS)
    check_keys(f.curve for f in diagnosis.FAILURES if f.curve != diagnosis.REWARD_GAP)
    labels = diagnosis.heldout_labels()
    assert set(labels) == set(diagnosis.HELDOUT.variants)
    assert set(labels.values()) == set(diagnosis.LABELS)
    assert all(sum(v == lab for v in labels.values()) >= 3 for lab in diagnosis.LABELS)


def test_every_failure_begins_mid_run_on_a_healthy_run():
    lo, hi = (round(f * diagnosis.STEPS) for f in diagnosis.ONSET_RANGE)
    gallery = diagnosis.GALLERY.configs(make_config("smoke"), seed=0, steps=diagnosis.STEPS)
    for f in diagnosis.FAILURES:
        cfg = gallery[f.label]
        assert lo <= cfg.onset <= hi and replace(cfg, changes=()) == gallery["healthy"], f.label
        assert cfg.at(cfg.onset) == replace(gallery["healthy"], **f.change), f.label
        for name, kw in (f.fixes or {}).items():                          # one knob from the failure
            assert len(gallery[name].diff(cfg)) == 1 and len(kw) == 1, name
    labels = diagnosis.heldout_labels()
    held = diagnosis.HELDOUT.configs(make_config("smoke"), seed=3, steps=diagnosis.STEPS)
    onsets = {c.onset for n, c in held.items() if labels[n] != "healthy"}
    assert all(lo <= o <= hi for o in onsets) and len(onsets) >= 10        # onsets at many steps
    assert sum(len(c.changes) == 2 for c in held.values()) >= 3            # two things go wrong
    healthy = [c for n, c in held.items() if labels[n] == "healthy"]
    assert len({json.dumps(config_record(c), sort_keys=True) for c in healthy}) == len(healthy) >= 6


def _configs(path):
    raw = json.loads(path.read_text())
    return raw["meta"], {json.dumps(h["config"], sort_keys=True): name
                         for name, hs in raw["runs"].items() for h in hs}


def test_heldout_runs_are_other_runs_than_the_gallery_under_opaque_names():
    g_meta, gallery = _configs(GALLERY_FILE)
    h_meta, heldout = _configs(HELDOUT_FILE)
    assert not set(gallery) & set(heldout)                     # not one run in both files
    assert not set(g_meta["seeds"]) & set(h_meta["seeds"])     # other seeds
    _, runs = load_results(HELDOUT_FILE)
    assert list(runs) == list(diagnosis.HELDOUT.variants)
    names = " ".join(runs)
    assert not any(word in names for lab in diagnosis.LABELS for word in lab.split("_"))
    base = diagnosis.HELDOUT.configs(make_config("smoke"), seed=0, steps=diagnosis.STEPS)
    for name, hists in runs.items():
        want = {k: v for k, v in config_record(base[name]).items() if k != "seed"}
        for h in hists:               # a field added after the file was made: the run had its default
            stored = {**config_record(RunConfig()), **h.config}
            assert {k: stored[k] for k in want} == want, name
    assert not (ROOT / "notebooks" / "data" / HELDOUT_FILE.name).exists()
    assert json.dumps(diagnosis.heldout_labels()) not in HELDOUT_FILE.read_text()


def test_diagnose_sees_the_monitors_and_nothing_that_names_the_knob():
    _, runs = load_results(HELDOUT_FILE)
    h = next(iter(runs.values()))[0]
    c = diagnosis.Curves.of(h)
    assert set(c.keys) == set(diagnosis.GRADED_KEYS)
    assert not hasattr(c, "config") and not hasattr(c, "name")
    assert "lr" not in c.keys and not any(k.startswith(("time/", "speed/")) for k in c.keys)
    assert c.series("reward/mean") == h.series("reward/mean")
    with pytest.raises(KeyError, match="no monitor 'lr'"):
        c.series("lr")


# A second rule set, built differently from the reference (medians of thirds, the reward gap per
# token instead of the gap): the judge's bar must let any sensible diagnosis through, not only the
# reference's thresholds.
OTHER_RULES = '''
import statistics


def _from(steps, values, test, width=5):
    for i in range(len(values) - width + 1):
        window = [x for x in values[i:i + width] if x == x]
        if window and test(statistics.median(window)):
            return steps[i]
    return None


def diagnose(curves):
    c = curves
    marks = {"stale_sampler": _from(*c.series("mismatch/abs_logratio_p99"), lambda m: m > 1e-2),
             "no_signal": _from(*c.series("len/truncated_frac"), lambda m: m > 0.5),
             "kl_runaway": _from(*c.series("kl/ref"), lambda m: m > 1.2)}
    steps, cold = c.series("entropy/mean")
    ratio = [a / b if b else 1.0 for a, b in zip(cold, c.series("entropy/t1")[1])]
    marks["low_temperature"] = _from(steps, ratio, lambda m: m < 0.5)
    steps, gap = c.series("reward - acc/sampled")
    start = next((i for i in range(len(gap) - 4) if statistics.median(gap[i:i + 5]) > 0), None)
    if start is not None:                    # a fixed gap per token is a length term
        per_token = [g / n for g, n in zip(gap[start:], c.series("len/all")[1][start:]) if g > 0][:8]
        steady = statistics.pstdev(per_token) < 0.1 * statistics.mean(per_token)
        marks["length_reward" if steady else "reward_hacking"] = steps[start]
    hits = {k: v for k, v in marks.items() if v is not None}
    return min(hits, key=hits.get) if hits else "healthy"
'''


# What passed both graded sets when diagnose received the whole History: rules on the config alone.
READS_THE_CONFIG = """
def diagnose(curves):
    cfg = dict(getattr(curves, "config", None) or {})
    for _, knobs in cfg.get("changes", []):
        cfg.update(dict(knobs))
    if cfg.get("temperature", 1.0) < 0.6:
        return "low_temperature"
    if cfg.get("length_bonus"):
        return "length_reward"
    if cfg.get("mismatch") == "stale":
        return "stale_sampler"
    if cfg.get("verifier") == "contains":
        return "reward_hacking"
    if cfg.get("max_new_tokens", 6) < 3:
        return "no_signal"
    if cfg.get("lr", 1e-3) > 2.5e-3:
        return "kl_runaway"
    return "healthy"
"""
# ... and a rule on the run's name, which named its label in the held-out file before
READS_THE_NAME = """
from course_lib.toy.diagnosis import LABELS


def diagnose(curves):
    text = " ".join(str(getattr(curves, a, "")) for a in ("name", "label", "run")) + repr(curves)
    return next((lab for lab in LABELS if lab in text), "healthy")
"""


def test_another_sensible_rule_set_passes_and_blind_or_curve_blind_ones_fail(tmp_path):
    from course_lib.judge.registry import EXERCISES
    from course_lib.judge.runner import run_jobs
    files = {"other_rules.py": OTHER_RULES, "always_healthy.py": "def diagnose(curves):\n    return 'healthy'\n",
             "reads_the_config.py": READS_THE_CONFIG, "reads_the_name.py": READS_THE_NAME}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    jobs = [{"exercise": "ex13_diagnose_runs", "file": str(tmp_path / n), "time_limit": 60, "sample": False}
            for n in files]
    res = {Path(r["file"]).name: r for r in run_jobs(jobs, EXERCISES)}
    assert res["other_rules.py"]["status"] == "passed", res["other_rules.py"]["cases"]
    for name in ("always_healthy.py", "reads_the_config.py", "reads_the_name.py"):
        assert res[name]["status"] == "failed", name
        assert not any(c["passed"] for c in res[name]["cases"]), name                # neither set passes
    text = res["always_healthy.py"]["cases"][1]["message"]
    assert "true \\ given" in text and "no_signal" in text           # the confusion table is shown
