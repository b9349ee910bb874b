"""The stored GRPO runs on the real model (notebooks/data/real_lm_grpo.json) against the code that made them and
against themselves: each run's config is what benchmarks/real_lm_grpo.py builds today, its rows are whole and carry
the reply categories, the held-out summaries follow from the stored reply texts under today's verifier, the format
share agrees with the reward it was paid in, and lm.runs' comparisons on hand-made values."""
import importlib.util
import json
from pathlib import Path

import pytest

from course_lib.lm import runs
from course_lib.lm.task import ChatAdditionTask, exact
from course_lib.rl.history import config_record

ROOT = Path(__file__).resolve().parents[1]
RECORD = json.loads((ROOT / "notebooks" / "data" / "real_lm_grpo.json").read_text())
TASK = json.loads((ROOT / "notebooks" / "data" / "real_lm_task.json").read_text())
spec = importlib.util.spec_from_file_location("real_lm_grpo", ROOT / "benchmarks" / "real_lm_grpo.py")
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)


def test_every_stored_run_has_todays_config_and_all_its_rows():
    assert sorted(RECORD["runs"]) == sorted(script.PLAN), "chapter 13 reads every run of the plan"
    for key, run in RECORD["runs"].items():
        arm, seed = key.split("/")
        want = config_record(script.arm_config(arm, int(seed), RECORD["settings"]["steps"]))
        assert run["config"] == want, key
        assert [r["step"] for r in run["rows"]] == list(range(RECORD["settings"]["steps"] + 1)), key
        evals = [r["step"] for r in run["rows"] if "acc/heldout" in r]
        assert evals == [0, *range(run["config"]["eval_every"], run["config"]["steps"] + 1, run["config"]["eval_every"])]


LINEAGE = json.loads((ROOT / "notebooks" / "data" / "real_lm_lineage.json").read_text())


@pytest.mark.parametrize("record", [RECORD, LINEAGE], ids=["real_lm_grpo", "real_lm_lineage"])
def test_the_held_out_summaries_follow_from_the_stored_replies(record):
    q = ChatAdditionTask().questions("heldout")
    G = record["settings"]["eval"]["group_size"]
    assert G >= 32, "pass@k after training is read up to k = 32"
    assert record["runs"], "the record holds runs"
    for key, run in record["runs"].items():
        for kind, n in (("sampled", G), ("greedy", 1)):
            s = run["after"][kind]
            answers = [a for a in q.answers for _ in range(n)]
            right = [exact(t, a) for t, a in zip(s["texts"], answers)]      # today's verifier on the stored texts
            assert len(right) == s["replies"] == n * len(q.texts) == len(s["finished"]), key
            assert s["correct_per_group"] == [int(sum(right[i:i + n])) for i in range(0, len(right), n)], key
            assert s["pass@1"] == pytest.approx(sum(right) / len(right)), key
            assert s["categories"] == pytest.approx(runs.category_shares(s)), key
    assert record["settings"]["eval"]["max_new_tokens"] == TASK["settings"]["max_new_tokens"]   # the same measure
    assert record["settings"]["eval"]["temperature"] == TASK["settings"]["temperature"]


def test_every_row_carries_the_reply_categories_and_they_agree_with_the_reward():
    """reward = exact + 0.5 x format, so the formatted share is (reward - exact share) / 0.5; the exact share is
    acc/sampled and the finished share 1 - the truncated one."""
    for key, run in RECORD["runs"].items():
        w = run["config"]["format_weight"]
        for r in run["rows"][1:]:
            assert r["replies/formatted"] == pytest.approx((r["reward/mean"] - r["acc/sampled"]) / w, abs=1e-6), key
            assert r["replies/exact"] == pytest.approx(r["acc/sampled"])
            assert r["replies/finished"] == pytest.approx(1 - r["len/truncated_frac"])
            assert r["replies/right_sum"] >= r["replies/exact"] and r["replies/no_sum"] <= 1 - r["replies/right_sum"]


def test_one_update_per_batch_never_clips():
    """pi_old is the loss forward's own log-probs: every ratio is exactly 1, so no clip fraction is ever
    above 0 (chapter 13 says so instead of plotting it)."""
    for run in RECORD["runs"].values():
        for r in run["rows"][1:]:
            assert r["clip/low_frac"] == r["clip/high_frac"] == r["ratio/outside_frac"] == 0.0
            assert r["ratio/mean"] == pytest.approx(1.0, abs=1e-6)     # a mean of exact 1s in float32


def test_comparisons_on_hand_made_values():
    run = {"config": {"format_weight": 0.5},
           "rows": [{"step": 0}, *({"step": s, "reward/mean": 0.5 + 0.5 * f, "replies/formatted": f, "len/all": s}
                                   for s, f in ((1, 0.0), (2, 0.25), (3, 0.5), (4, 1.0)))]}
    assert runs.early_late(run, "len/all", width=2) == (1.5, 3.5)
    assert runs.early_late(run, "replies/formatted", width=1) == (0.0, 1.0)
    rising = {"config": {"format_weight": 0.5},
              "rows": [{"step": 0}, *({"step": s, "acc/sampled": float(s >= 8)} for s in range(1, 16))]}
    assert runs.half_way_step(rising, "acc/sampled", width=3) == 9         # 3-step mean 2/3 >= 1/2 first at 9
    flat = {"rows": [{"step": 0}, *({"step": s, "acc/sampled": 0.02 * (s % 2)} for s in range(1, 16))]}
    assert runs.half_way_step(flat, "acc/sampled", width=3) is None        # it never moved
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
    assert runs.learning_split(rec) == [["sampling", 2.0, 0.25], ["loss forwards (with gradient)", 1.0, 0.125],
                                        ["backward", 4.0, 0.5], ["step (median)", 8.0, 1.0]]
