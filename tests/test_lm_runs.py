"""The stored GRPO runs on the real model (notebooks/data/real_lm_grpo.json) against the code that made them and
against themselves: each run's config is what benchmarks/real_lm_grpo.py builds today, its rows are whole, the
held-out summaries follow from their per-question counts, the format rate chapter 13 derives from the reward is
the format verdict's share, and lm.runs' comparisons on hand-made values."""
import importlib.util
import json
from pathlib import Path

import pytest

from course_lib.lm import runs
from course_lib.rl.history import config_record

ROOT = Path(__file__).resolve().parents[1]
RECORD = json.loads((ROOT / "notebooks" / "data" / "real_lm_grpo.json").read_text())
TASK = json.loads((ROOT / "notebooks" / "data" / "real_lm_task.json").read_text())
spec = importlib.util.spec_from_file_location("real_lm_grpo", ROOT / "benchmarks" / "real_lm_grpo.py")
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)


def test_every_stored_run_has_todays_config_and_all_its_rows():
    assert RECORD["runs"], "no stored run"
    for key, run in RECORD["runs"].items():
        arm, seed = key.split("/")
        want = json.loads(json.dumps(config_record(script.arm_config(arm, int(seed), RECORD["settings"]["steps"]))))
        assert run["config"] == want, key
        assert [r["step"] for r in run["rows"]] == list(range(RECORD["settings"]["steps"] + 1)), key
        evals = [r["step"] for r in run["rows"] if "acc/heldout" in r]
        assert evals == [0, *range(run["config"]["eval_every"], run["config"]["steps"] + 1, run["config"]["eval_every"])]


def test_the_held_out_summaries_follow_from_the_per_question_counts():
    for key, run in RECORD["runs"].items():
        s = run["after"]["sampled"]
        counts = s["correct_per_group"]
        assert len(counts) == 60 and s["replies"] == 480, key
        assert s["pass@1"] == pytest.approx(sum(counts) / 480)
        assert s["pass@8"] == pytest.approx(sum(c > 0 for c in counts) / 60)
        assert run["after"]["greedy"]["pass@1"] == pytest.approx(sum(run["after"]["greedy"]["correct_per_group"]) / 60)
    assert RECORD["settings"]["eval"]["max_new_tokens"] == TASK["settings"]["max_new_tokens"]   # the same measure
    assert RECORD["settings"]["eval"]["group_size"] == TASK["settings"]["group_size"]


def test_the_derived_format_rate_is_a_share_of_the_samples():
    """reward = exact + 0.5 x format, so the derived rate times 32 samples is a whole number in 0..32."""
    for run in RECORD["runs"].values():
        n = run["config"]["prompts_per_step"] * run["config"]["group_size"]
        _, rates = runs.format_rate(run)
        for r in rates:
            assert 0 <= r <= 1 and abs(r * n - round(r * n)) < 1e-6


def test_one_update_per_batch_never_clips():
    """pi_old is the loss forward's own log-probs: every ratio is exactly 1, so no clip fraction is ever
    above 0 (chapter 13 says so instead of plotting it)."""
    for run in RECORD["runs"].values():
        for r in run["rows"][1:]:
            assert r["clip/low_frac"] == r["clip/high_frac"] == r["ratio/outside_frac"] == 0.0
            assert r["ratio/mean"] == pytest.approx(1.0, abs=1e-6)     # a mean of exact 1s in float32


def test_comparisons_on_hand_made_values():
    assert runs.separated([0.2, 0.25], [0.3, 0.4]) == 1
    assert runs.separated([0.2, 0.25], [0.1, 0.19]) == -1
    assert runs.separated([0.2, 0.25], [0.22, 0.4]) == 0
    assert runs.spread([0.1, 0.2, 0.3]) == "0.200 (0.100-0.300)"
    run = {"config": {"format_weight": 0.5},
           "rows": [{"step": 0}, *({"step": s, "reward/mean": 0.5 + 0.5 * f, "acc/sampled": 0.5, "len/all": s}
                                   for s, f in ((1, 0.0), (2, 0.25), (3, 0.5), (4, 1.0)))]}
    assert runs.format_rate(run)[1] == [0.0, 0.25, 0.5, 1.0]
    assert runs.early_late(run, "len/all", width=2) == (1.5, 3.5)
    assert runs.early_late(run, "format", width=1) == (0.0, 1.0)
    rising = {"config": {"format_weight": 0.5},
              "rows": [{"step": 0}, *({"step": s, "acc/sampled": float(s >= 8)} for s in range(1, 16))]}
    assert runs.half_way_step(rising, "acc/sampled", width=3) == 9         # 3-step mean 2/3 >= 1/2 first at 9
    task = {"seeds": {"0": {"correct_per_group": [0, 2, 0, 0]}, "1": {"correct_per_group": [0, 0, 1, 0]}}}
    assert runs.never_solved(task) == [0, 3]
    after = {"after": {"sampled": {"correct_per_group": [8, 0, 5, 2], "replies": 32}}}
    assert runs.solved_share(after, [0, 3]) == (10 / 16, 1.0) and runs.solved_share(after, [1]) == (0.0, 0.0)
    live = [{"step": 1, "reward/mean": 0.5}, {"step": 2, "reward/mean": 0.25}]
    assert runs.differing_first_rows(live, run["rows"][1:3], ("reward/mean",)) == [
        "step 2 reward/mean: 0.25 live vs 0.625 stored"]


def test_a_live_run_agrees_by_its_float_path():
    def run(*rewards):
        return {"rows": [{"step": 0, "acc/heldout": 0.5}, *({"step": s, "reward/mean": r}
                                                            for s, r in enumerate(rewards, 1))]}
    by_seed = {0: run(0.25, 0.5, 0.75), 1: run(0.125, 0.625, 1.0)}
    keys = ("acc/heldout", "reward/mean")
    repeat = run(0.25, 0.5)["rows"]
    inside = run(0.125, 0.75)["rows"]                # not seed 0's, yet within the seeds' range 0.125-1.0
    assert runs.live_agrees(repeat, by_seed, keys, same_path=True)
    assert not runs.live_agrees(inside, by_seed, keys, same_path=True)
    assert runs.live_agrees(inside, by_seed, keys, same_path=False)
    assert not runs.live_agrees(run(0.0625, 0.5)["rows"], by_seed, keys, same_path=False)
    assert not runs.live_agrees(run(0.25, 0.5)["rows"], by_seed, keys, same_path=False, first_steps=1)


def test_the_trainers_side_by_side_read_each_part_from_its_own_clock():
    rec = {"runs": {"course": {"summary": {"median_step_s": 20.0, "median_phase_s":
                                           {"sample": 7.0, "targets": 0.5, "learn": 12.0, "other": 0.25}}},
                    "TRL": {"summary": {"median_step_s": 30.0, "median_phase_s":
                                        {"sample": 9.0, "score": 0.125, "loss forward": 5.0,
                                         "backward + optimiser": 15.0, "other": 0.75}}}}}
    rows = runs.trainers_side_by_side(rec)
    assert [r[1:] for r in rows] == [[7.0, 9.0], [0.5, 0.125], [12.0, 20.0], [0.25, 0.75], [20.0, 30.0]]
    stored = json.loads((ROOT / "notebooks" / "data" / "trl_real.json").read_text())
    rows = runs.trainers_side_by_side(stored)
    assert rows[-1][2] / rows[-1][1] == pytest.approx(stored["step_time_ratio"])


def test_the_learning_split_gives_each_part_its_share_of_the_step():
    rec = {"median_step_s": 8.0, "median_s": {"sample": 2.0, "loss forward": 1.0, "backward": 4.0}}
    assert runs.learning_split(rec) == [["sample", 2.0, 0.25], ["loss forward", 1.0, 0.125],
                                        ["backward", 4.0, 0.5], ["step (median)", 8.0, 1.0]]
