"""``lm.sweep``: a learning-rate sweep read by chapter 07's rule, on hand-made runs whose answer is known."""
import pytest

from course_lib.lm import sweep as sw


def run(lr, seed, acc, rank=None, **other):
    cfg = {"lr": lr, "seed": seed, "loss": "grpo", "policy": "smollm2", **other}
    if rank is not None:
        cfg.update(policy="smollm2_lora", lora_rank=rank, lora_alpha=32.0, lora_targets=["all-linear"])
    return {"config": cfg, "after": {"sampled": {"pass@1": acc}}}


def test_runs_are_grouped_by_setting_and_learning_rate_full_fine_tuning_first():
    runs = {"a": run(2e-4, 0, 0.9, rank=1), "b": run(2e-5, 0, 0.8), "c": run(2e-5, 1, 0.7),
            "d": run(2e-5, 0, 0.3, rank=1)}
    assert sw.sweep(runs) == {"full": {2e-5: {0: 0.8, 1: 0.7}}, "rank 1": {2e-5: {0: 0.3}, 2e-4: {0: 0.9}}}


def test_a_run_that_differs_outside_the_sweep_is_named():
    with pytest.raises(ValueError, match=r"run 'b' differs from 'a' in 'loss'"):
        sw.sweep({"a": run(2e-5, 0, 0.8), "b": run(5e-5, 0, 0.8, loss="dapo")})
    with pytest.raises(ValueError, match="repeats full, lr 2e-05, seed 0"):
        sw.sweep({"a": run(2e-5, 0, 0.8), "b": run(2e-5, 0, 0.7)})
    with pytest.raises(ValueError, match="named_runs is empty"):
        sw.sweep({})


# one seed everywhere except the best, whose three seeds span 0.10
POINTS = {1e-5: {0: 0.50}, 3e-5: {0: 0.84}, 1e-4: {0: 0.90, 1: 0.95, 2: 0.85}, 3e-4: {0: 0.81}, 1e-3: {0: 0.20}}


def test_the_band_holds_the_learning_rates_within_the_seed_range_of_the_best():
    assert sw.best_lr(POINTS) == 1e-4
    # 0.90 - 0.84 = 0.06 <= 0.10: as good; 0.90 - 0.81 = 0.09 <= 0.10: as good; 0.50 and 0.20 are not
    assert sw.good_band(POINTS) == (3e-5, 3e-4)
    assert sw.best_lr_bounds(POINTS) == (1e-5, 1e-3)
    # a point that is as good but not next to the band stays out: the band is unbroken
    gap = {**POINTS, 1e-3: {0: 0.89}}
    assert sw.good_band(gap) == (3e-5, 1e-3) and sw.best_lr_bounds(gap) == (1e-5, None)
    broken = {**POINTS, 3e-4: {0: 0.20}, 1e-3: {0: 0.89}}
    assert sw.good_band(broken) == (3e-5, 1e-4)


def test_with_one_seed_everywhere_the_band_is_the_best_point_and_the_bounds_its_neighbours():
    one = {lr: {0: v[0]} for lr, v in POINTS.items()}
    assert sw.good_band(one) == (1e-4, 1e-4)
    assert sw.best_lr_bounds(one) == (3e-5, 3e-4)
    edge = {1e-5: {0: 0.9}, 3e-5: {0: 0.5}}
    assert sw.best_lr_bounds(edge) == (None, 3e-5)
    assert sw.best_lr({1e-5: {0: 0.5}, 3e-5: {0: 0.5}}) == 1e-5         # a tie goes to the lower rate


def test_the_ratio_of_best_learning_rates_and_its_range():
    full = {1e-5: {0: 0.6}, 2e-5: {0: 0.9}, 5e-5: {0: 0.7}}
    lora = {2e-5: {0: 0.3}, 6e-5: {0: 0.5}, 2e-4: {0: 0.95}, 6e-4: {0: 0.8}}
    r = sw.lr_ratio(lora, full)
    assert r["ratio"] == pytest.approx(10)
    assert r["lowest"] == pytest.approx(6e-5 / 5e-5) and r["highest"] == pytest.approx(6e-4 / 1e-5)
    assert sw.lr_ratio({2e-4: {0: 0.9}, 6e-4: {0: 0.95}}, full)["highest"] is None     # best at the grid's edge


def test_bad_points_are_named():
    with pytest.raises(ValueError, match="points must map each learning rate"):
        sw.best_lr({1e-5: {}})


def test_a_range_reads_each_open_side_in_words():
    assert sw.range_text(3.0, 100.0) == "between 3.0 and 100.0"
    assert sw.range_text(3.0, None) == "above 3.0"
    assert sw.range_text(None, 100.0, ".0f") == "below 100"
    assert sw.range_text(None, None) == "unbounded"


def test_the_seeded_rate_is_where_the_seeds_went_even_once_another_point_tops_it():
    points = {2e-4: {0: 0.96}, 6e-4: {0: 0.97, 1: 0.90, 2: 0.85}, 2e-3: {0: 0.2}}
    assert sw.best_lr(points) == 2e-4                       # one lucky seed now tops the mean of three
    assert sw.seeded_lr(points) == 6e-4
    assert sw.seeded_lr({1e-5: {0: 0.5}, 2e-5: {0: 0.7}}) == 2e-5                   # no seeds added: the best


def test_a_tie_goes_to_the_point_with_more_seeds():
    # chapter 15's full fine-tuning: 1e-5's one run answers 1542 of 1728 held-out samples, and 2e-5's three seeds
    # as many on average
    n = 54 * 32
    points = {1e-5: {0: 1542 / n}, 2e-5: {0: 1605 / n, 1: 1684 / n, 2: 1337 / n}}
    assert sw.best_lr(points) == 2e-5 and sw.ties(points) == [1e-5]
    assert sw.ties(POINTS) == []
    # the seeds' range (0.20) then covers the other point, and the sweep bounds neither side
    assert sw.good_band(points) == (1e-5, 2e-5) and sw.best_lr_bounds(points) == (None, None)


def test_a_point_of_the_sweep_is_its_settings_runs_at_that_rate():
    runs = {"a": run(2e-5, 0, 0.8), "b": run(2e-5, 1, 0.7), "c": run(2e-5, 0, 0.3, rank=1), "d": run(6e-4, 0, 0.9, rank=1)}
    assert sw.runs_at(runs, "full", 2e-5) == {0: runs["a"], 1: runs["b"]}       # not rank 1's run at the same rate
    assert sw.runs_at(runs, "rank 1", 2e-5) == {0: runs["c"]}
