"""The toy trainer split into micro-batches and data-parallel ranks gives the single-process update.

For every registered loss (``LOSSES`` and ``FRAMEWORK_LOSSES``, Clip-Cov and KL-Cov aside: they centre
on batch statistics) in every aggregation mode it accepts, the first optimiser step's parameter
gradient of ``trainer.learn`` on the one-step oracle's batch (tests/test_toy_oracle.py: a mismatched
sampler, so ratios are off 1 and clips bind; a zero-signal group; uneven lengths) is the same
  - in one process with 3 uneven micro-batches (gradient accumulation),
  - on 2 gloo ranks with 2 micro-batches each and on 4 ranks with 3 (DDP averaging),
as in one process in one piece, within float32 rounding. Planted: the piece's own mean (no
``piece_scale``) or a missing factor R fails (``test_a_split_without_the_rule_fails``).
"""
from __future__ import annotations

import inspect
from dataclasses import replace

import pytest
import torch

from course_lib import distributed as D
from course_lib.aggregation import MODES
from course_lib.losses import FRAMEWORK_LOSSES, LOSSES, resolve_loss
from course_lib.split import BATCH_STATISTIC_LOSSES
from course_lib.toy import trainer
from course_lib.toy.config import ToyConfig
from test_toy_oracle import BASE, make_models

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 2e-5                                   # of the largest gradient entry; float32 sums in another order


def _cases() -> dict:
    cases = {}
    for name in sorted({*LOSSES, *FRAMEWORK_LOSSES} - set(BATCH_STATISTIC_LOSSES)):
        takes_agg = "agg" in inspect.signature(resolve_loss(name)).parameters
        for mode in sorted(MODES) if takes_agg else [None]:
            cases[f"{name},{mode or 'default'}"] = replace(BASE, loss=name, agg=mode)
    cases["grpo,kl,entropy,mask_truncated"] = replace(BASE, loss="grpo", kl_coef=0.5, entropy_coef=0.05,
                                                      mask_truncated=True)
    cases["dapo,pi_old=learner,tis"] = replace(BASE, loss="dapo", old_logp_source="learner", correction="tis")
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def setup():
    model, ref_model, batch = make_models(1.0)
    return model.state_dict(), ref_model.state_dict(), batch


@pytest.fixture(scope="module")
def full(setup):
    return {k: D.toy_first_update(cfg, *setup) for k, cfg in CASES.items()}


def _assert_same(got, want, what):
    scale = max(float(g.abs().max()) for g in want)
    assert scale > 1e-6, f"{what}: the batch gives no gradient"
    err = max(float((a - b).abs().max()) for a, b in zip(got, want))
    assert err <= TOL * scale, f"{what}: gradient off by {err:.2e} (largest entry {scale:.2e})"


def test_every_case_is_a_loss_and_mode_the_trainer_runs():
    assert len(CASES) >= 60 and {"grpo,token-mean", "gspo,seq-mean-token-mean", "cispo,token-sum"} <= set(CASES)


@pytest.mark.parametrize("key", CASES)
def test_three_uneven_micro_batches_accumulate_the_single_step_gradient(setup, full, key):
    _assert_same(D.toy_first_update(replace(CASES[key], micro_batches=3), *setup), full[key], key)


@pytest.mark.parametrize("world_size, micro", [(2, 2), (4, 3)])
def test_ddp_over_gloo_ranks_gives_the_single_process_gradient(setup, full, world_size, micro):
    keys = list(CASES)
    got = D.toy_first_updates([replace(CASES[k], world_size=world_size, micro_batches=micro) for k in keys],
                              *setup, world_size)
    for k, g in zip(keys, got):
        _assert_same(g, full[k], f"{k}, {world_size} ranks x {micro} micro-batches")


def test_a_split_without_the_rule_fails(setup, full, monkeypatch):
    """The tests above can fail: with each piece's own mean (scale 1), 3 micro-batches sum 3 means."""
    key = "grpo,token-mean"
    monkeypatch.setattr("course_lib.split.piece_scale", lambda *a, **k: 1.0)
    with pytest.raises(AssertionError, match="gradient off"):
        _assert_same(D.toy_first_update(replace(CASES[key], micro_batches=3), *setup), full[key], key)


def test_the_split_knobs_refuse_what_they_cannot_split():
    with pytest.raises(ValueError, match="world_size must be an int >= 1"):
        ToyConfig(world_size=0)
    with pytest.raises(ValueError, match=r"minibatches x world_size \(1 x 3\) must divide prompts_per_step"):
        ToyConfig(world_size=3)
    with pytest.raises(ValueError, match="micro_batches .* must be at most the rows"):
        ToyConfig(prompts_per_step=4, group_size=2, world_size=2, micro_batches=5)
    with pytest.raises(ValueError, match="'clip_cov' centres on statistics of the whole batch"):
        ToyConfig(loss="clip_cov", micro_batches=2)
    for kw in (dict(adv_estimator="reinforce_pp"), dict(dynamic_sampling=True), dict(std_scope="batch")):
        with pytest.raises(ValueError, match="needs statistics of the whole batch"):
            ToyConfig(world_size=2, **kw)
    with pytest.raises(ValueError, match="run it with train_distributed"):
        trainer.train(ToyConfig(world_size=2, steps=1, warm_steps=0), progress=False)
    with pytest.raises(ValueError, match="world_size must be >= 2 for train_distributed"):
        trainer.train_distributed(ToyConfig())
