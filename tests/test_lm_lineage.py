"""course_lib.lm.lineage on hand-made runs: seed bands, chapter 07's comparison rule, what each loss's clip removes,
the share of clipped optimiser steps and how concentrated the sampled replies are."""
import pytest

from course_lib.lm import lineage as L


def run(values: dict, loss: str = "grpo", grad_norms=None, grad_clip: float = 1.0) -> dict:
    """A stored run whose rows carry ``values`` {key: [value at step 1, 2, ...]}."""
    n = len(next(iter(values.values())))
    rows = [{"step": 0}] + [{"step": i + 1, **{k: v[i] for k, v in values.items()}} for i in range(n)]
    return {"rows": rows, "config": {"loss": loss, "grad_clip": grad_clip}, "grad_norms": grad_norms or []}


def test_a_seed_band_is_the_mean_lowest_and_highest_at_each_step_every_seed_logged():
    arm = {0: run({"x": [1.0, 2.0, 3.0]}), 1: run({"x": [3.0, 4.0, 5.0]}), 2: run({"x": [2.0, 0.0]})}
    steps, m, lo, hi = L.seed_band(arm, "x")
    assert steps == [1, 2] and m == [2.0, 2.0] and lo == [1.0, 0.0] and hi == [3.0, 4.0]


def test_the_late_values_are_each_seeds_mean_over_the_last_steps():
    arm = {1: run({"x": [0.0, 0.0, 2.0, 4.0]}), 0: run({"x": [9.0, 9.0, 1.0, 1.0]})}
    assert L.late_values(arm, "x", width=2) == [1.0, 3.0]                     # seed order


def test_what_a_clip_removes_depends_on_the_loss():
    rows = {"clip/low_frac": [0.1, 0.0], "clip/high_frac": [0.05, 0.2], "clip_seq/low_frac": [0.3, 0.1],
            "clip_seq/high_frac": [0.0, 0.4], "ratio/mean": [1.0, 1.0]}
    unit, steps, share = L.removed_share(run(rows, "dapo"))
    assert unit == "token" and steps == [1, 2] and share == pytest.approx([0.15, 0.2])
    unit, _, share = L.removed_share(run(rows, "gspo"))
    assert unit == "reply" and share == pytest.approx([0.3, 0.5])
    for loss in ("cispo", "sapo"):                          # a clipped weight or a gate: no gradient removed
        assert L.removed_share(run(rows, loss)) == (None, [1, 2], [0.0, 0.0])
    with pytest.raises(ValueError, match="loss must be one of"):
        L.removed_share(run(rows, "gpg"))


def test_the_share_of_clipped_optimiser_steps_counts_every_update():
    r = run({"x": [0.0, 0.0]}, grad_norms=[[0.5, 1.5, 2.0, 0.9], [1.0, 3.0, 0.1, 0.2]], grad_clip=1.0)
    assert L.clipped_update_share(r) == 3 / 8                    # a norm equal to the clip is not scaled down
    with pytest.raises(ValueError, match="no gradient norm"):
        L.clipped_update_share(run({"x": [0.0]}))


def test_the_top_reply_share_reads_each_questions_replies_and_can_read_fewer():
    measure = {"replies": 8, "correct_per_group": [0, 0], "texts": ["a", "a ", "b", "a", "x", "y", "z", "x"]}
    assert L.top_reply_share(measure) == pytest.approx((3 / 4 + 2 / 4) / 2)
    assert L.top_reply_share(measure, per_question=2) == pytest.approx((2 / 2 + 1 / 2) / 2)
    with pytest.raises(ValueError, match=r"per_question must be in 1\.\.4"):
        L.top_reply_share(measure, per_question=5)


def test_every_arm_is_a_config_whose_clip_can_bind_and_differs_from_grpo_as_its_paper_says():
    from course_lib.rl.loss_step import clip_cannot_bind
    configs = {arm: L.arm_config(arm, seed=1) for arm in L.ARMS}
    grpo = configs["grpo"]
    for arm, cfg in configs.items():
        assert clip_cannot_bind(cfg) is None and cfg.epochs * cfg.minibatches == 4 and cfg.seed == 1
        assert cfg.policy == "smollm2" and cfg.monitor_kl_ref
    assert set(configs["dapo"].diff(grpo)) == {"loss"} and configs["gspo"].loss == "gspo"
    assert set(configs["random_noclip"].diff(configs["random"])) == {"eps_low", "eps_high"}
    assert configs["random"].verifier == "random" and configs["random"].format_weight == 0
    with pytest.raises(ValueError, match="arm must be one of"):
        L.arm_config("ppo", seed=0)


def test_the_update_spread_is_each_batchs_norm_range_over_its_mean():
    r = run({"x": [0.0, 0.0]}, grad_norms=[[1.0, 3.0], [2.0, 2.0, 2.0]])
    assert L.update_spread(r) == pytest.approx((2.0 / 2.0 + 0.0) / 2)
    with pytest.raises(ValueError, match="two or more optimiser steps"):
        L.update_spread(run({"x": [0.0]}, grad_norms=[[1.0]]))


@pytest.mark.parametrize("arm_lates, expect, verdict", [
    ((1.0, 1.1, 1.2), +1, "reproduced"),
    ((1.0, 1.1, 1.2), -1, "opposite"),
    ((0.0, 0.15, 0.3), +1, "inside the seeds' spread"),
    ((0.0, 0.15, 0.3), 0, "reproduced"),                  # a tie is what "as well" predicts
    ((1.0,), +1, "one seed: not weighed"),
])
def test_a_claim_is_read_against_the_seeds_spread(arm_lates, expect, verdict):
    arms = {"a": {s: run({"m": [v, v]}) for s, v in enumerate(arm_lates)},
            "ref": {s: run({"m": [v, v]}) for s, v in enumerate((0.1, 0.15, 0.2))}}
    got = L.read_claim(arms, L.PaperClaim("t", "s", "a", "ref", "m", expect), width=2)
    assert got["verdict"] == verdict and got["values"] == list(arm_lates)
    assert got["gap"] == pytest.approx(sum(arm_lates) / len(arm_lates) - 0.15)
    assert got["spread"] == pytest.approx(max(max(arm_lates) - min(arm_lates), 0.2 - 0.1))


def test_learning_faster_is_read_on_the_reward_over_every_step_not_its_late_mean():
    """Two arms that end level: the one that got there first has the higher mean over the run."""
    fast = {s: run({"reward/mean": [0.5 + d, 1.0, 1.0, 1.0]}) for s, d in enumerate((0.0, 0.05))}
    slow = {s: run({"reward/mean": [0.0 + d, 0.2, 1.0, 1.0]}) for s, d in enumerate((0.0, 0.05))}
    assert L.claim_values(fast, L.RUN_MEAN) == pytest.approx([0.875, 0.8875])
    c = next(c for c in L.CLAIMS if c.arm == "cispo")
    assert c.measure == L.RUN_MEAN
    assert L.read_claim({"cispo": fast, "dapo": slow}, c, width=2)["verdict"] == "reproduced"


def test_the_toys_verdicts_are_chapter_11s():
    """Chapter 11's own checks on the same stored runs: entropy ties under Clip-Higher, wrong answers' lengths tie."""
    from pathlib import Path
    from course_lib.toy.long_answers import verdict_checks
    data = Path(__file__).resolve().parents[1] / "notebooks" / "data"
    checks = {text: holds for _, text, holds in verdict_checks(data)}
    toy = L.toy_verdicts(data)
    assert checks["entropy ties between eps_high 0.2 and 0.28"] and toy[L.CLAIMS[0].text].endswith("ch. 11 tie")
    assert checks["five seeds: wrong answers' lengths tie"] and toy[L.CLAIMS[3].text].endswith("ch. 11 tie")
    assert set(toy) == {c.text for c in L.CLAIMS}


# ----------------------------------------------------------------------------------------------
# the stored runs (notebooks/data/real_lm_lineage*.json) against the script that made them
# ----------------------------------------------------------------------------------------------
def _script():
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("real_lm_lineage", root / "benchmarks" / "real_lm_lineage.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _record(name):
    import json
    from pathlib import Path
    return json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "data" / name).read_text())


@pytest.mark.parametrize("name, pilot", [("real_lm_lineage.json", False), ("real_lm_lineage_pilot.json", True)])
def test_every_stored_run_is_todays_config_with_all_its_rows_and_every_updates_gradient_norm(name, pilot):
    import json
    from course_lib.rl.history import config_record
    script, record = _script(), _record(name)
    plan = script.PILOT_PLAN if pilot else script.PLAN
    steps = record["settings"]["steps"]
    assert record["runs"] and set(record["runs"]) <= set(plan)
    assert record["settings"]["regime"] == L.REGIME and steps == (script.PILOT_STEPS if pilot else script.STEPS)
    for key, run in record["runs"].items():
        arm, seed = key.split("/")
        assert run["config"] == config_record(script.arm_config(arm, int(seed), steps)), key
        assert [r["step"] for r in run["rows"]] == list(range(steps + 1)), key
        updates = run["config"]["epochs"] * run["config"]["minibatches"]
        assert [len(s) for s in run["grad_norms"]] == [updates] * steps, key
        assert (run["after"] is None) == pilot, key


def clipped(run: dict) -> float:
    """The share of a run's tokens whose gradient the clip removed, over its steps."""
    rows = run["rows"][1:]
    return sum(r["clip/low_frac"] + r["clip/high_frac"] for r in rows) / len(rows)


def test_the_stored_runs_clip_where_the_regime_lets_them_and_the_opened_range_hardly_ever_does():
    record = _record("real_lm_lineage.json")
    for key, run in record["runs"].items():
        arm, seed = key.split("/")
        rows = run["rows"][1:]
        assert max(r["ratio/max"] for r in rows) > 1.2, f"{key}: no ratio ever left 1"   # several updates
        if arm not in ("sapo", "random_noclip"):                # a gate, and a range a ratio rarely reaches
            assert max(r["ratio/outside_frac"] for r in rows) > 0, f"{key}: no ratio ever left its range"
        if arm == "random_noclip" and f"random/{seed}" in record["runs"]:
            # [0.001, 1001]: a ratio below 0.001 within a batch's 4 updates is rare, not impossible
            assert clipped(run) < clipped(record["runs"][f"random/{seed}"]) / 20, key
        if arm in ("random", "random_noclip"):                              # a fair coin per reply
            rewards = [r["reward/mean"] for r in rows]
            assert abs(sum(rewards) / len(rewards) - 0.5) < 0.06, key       # 960 coins: sd 0.016
