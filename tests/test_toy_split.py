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

from course_lib import rl
from course_lib.rl import distributed as D
from course_lib.aggregation import MODES
from course_lib.losses import FRAMEWORK_LOSSES, LOSSES, resolve_loss
from course_lib.rl.split import BATCH_STATISTIC_LOSSES
from course_lib.rl import trainer
from course_lib.ranks import run_ranks
from course_lib.rl.config import RunConfig
from course_lib.toy.tokens import EOS, PAD
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
    monkeypatch.setattr("course_lib.rl.split.piece_scale", lambda *a, **k: 1.0)
    with pytest.raises(AssertionError, match="gradient off"):
        _assert_same(D.toy_first_update(replace(CASES[key], micro_batches=3), *setup), full[key], key)


def test_the_split_knobs_refuse_what_they_cannot_split():
    with pytest.raises(ValueError, match="world_size must be an int >= 1"):
        RunConfig(world_size=0)
    with pytest.raises(ValueError, match=r"minibatches x world_size \(1 x 3\) must divide prompts_per_step"):
        RunConfig(world_size=3)
    with pytest.raises(ValueError, match="micro_batches .* must be at most the rows"):
        RunConfig(prompts_per_step=4, group_size=2, world_size=2, micro_batches=5)
    with pytest.raises(ValueError, match="'clip_cov' centres on statistics of the whole batch"):
        RunConfig(loss="clip_cov", micro_batches=2)
    with pytest.raises(ValueError, match="dynamic_sampling=True needs statistics of the whole batch"):
        RunConfig(world_size=2, dynamic_sampling=True)
    with pytest.raises(ValueError, match="run it with train_distributed"):
        trainer.train(RunConfig(world_size=2, steps=1, warm_steps=0), progress=False)
    with pytest.raises(ValueError, match="world_size must be >= 2 for train_distributed"):
        trainer.train_distributed(RunConfig())


# ---- precision: a micro-batched loss forward runs in the requested arithmetic ----------------------
@pytest.mark.parametrize("micro", [1, 3])
def test_bf16_reaches_every_loss_forward_whole_or_in_micro_batches(setup, micro):
    """Under precision="bf16" every forward that carries a gradient returns bfloat16 logits from the
    policy's head (autocast), in one piece and in micro-batches alike."""
    model_state, ref_state, batch = setup
    cfg = replace(CASES["grpo,token-mean"], precision="bf16", micro_batches=micro)
    model = rl.build_model(cfg)
    model.load_state_dict(model_state)
    ref_model = rl.build_model(cfg).requires_grad_(False)
    ref_model.load_state_dict(ref_state)
    dtypes, forwards = [], []
    model.head.register_forward_hook(                 # a shared-prefix forward calls the head twice
        lambda mod, args, out: dtypes.append(out.dtype) if torch.is_grad_enabled() else None)
    model.register_forward_hook(lambda mod, args, out: forwards.append(1) if torch.is_grad_enabled() else None)
    trainer.learn(cfg, rl.loss_setup(cfg), model, ref_model, torch.optim.SGD(model.parameters(), lr=0.05),
                  batch, torch.Generator().manual_seed(7), lambda: 0.05)
    assert len(forwards) == micro and len(dtypes) >= micro, (forwards, dtypes)
    assert set(dtypes) == {torch.bfloat16}, dtypes


# ---- over ranks: metrics are the whole batch's, advantages too ------------------------------------
NOT_BATCH_MEANS = ("time/", "speed/", "flops/",        # this rank's own (train_distributed's docstring)
                   "mismatch/abs_logratio_p99")        # a quantile: the mean of the ranks' quantiles


def _sampled_metrics_rank(rank: int, world_size: int, collected):
    """On a rank: the sampling metrics of its share of ``collected`` (contiguous), all-gathered."""
    from course_lib.rl.data_parallel import DataParallel, gather_collected
    from course_lib.rl.rollout import Collected, sampling_metrics
    n = len(collected.rewards) // world_size
    rows = slice(rank * n, (rank + 1) * n)
    share = Collected(None, *(t[rows] for t in (collected.rewards, collected.correct, collected.lengths,
                                                collected.truncated)), 0.0, 0, 0.0)
    dp = DataParallel(rank, world_size, torch.nn.Identity())
    return rl.read_back(sampling_metrics(gather_collected(share, dp), 4))


def test_two_ranks_report_the_single_process_means_of_the_whole_batch(setup):
    """The metrics of a 2-rank step are the 1-rank step's on the same batch: the learning metrics
    (clip fractions, losses, entropy, kl/ref, ...) reduced over ranks, the sampling ones (mean reward)
    all-gathered; neither a sum over the ranks nor a mean of per-rank means that ignores their token
    counts (the two halves of this batch hold different numbers of tokens)."""
    from course_lib.rl.rollout import Collected, sampling_metrics
    from course_lib.toy.task import EOS
    model_state, ref_state, batch = setup
    half = len(batch.rewards) // 2
    assert int(batch.mask[:half].sum()) != int(batch.mask[half:].sum())
    cfg = replace(BASE, loss="grpo", kl_coef=0.5, entropy_coef=0.05, old_logp_source="learner",
                  correction="tis", correction_cap=1.2)
    _, one = D.toy_first_update(cfg, *setup, metrics=True)
    [(_, two)] = D.toy_first_updates([replace(cfg, world_size=2)], *setup, 2, metrics=True)
    compared = [k for k in one if not k.startswith(NOT_BATCH_MEANS)]
    assert {"clip/low_frac", "clip/high_frac", "loss/policy", "entropy/mean", "kl/ref", "is/weight_mean",
            "adv/pos_token_frac", "grad/norm"} <= set(compared)
    for k in compared:
        assert two[k] == pytest.approx(one[k], rel=1e-5, abs=1e-7), f"{k}: 2 ranks {two[k]}, 1 rank {one[k]}"
    lengths = batch.mask.sum(dim=1)
    collected = Collected(None, batch.rewards, (batch.rewards > 0).float(), lengths,
                          ~(batch.responses == EOS).any(dim=1), 0.0, 0, 0.0)
    want = rl.read_back(sampling_metrics(collected, 4))
    for rank_metrics in run_ranks(_sampled_metrics_rank, 2, collected):
        for k in ("reward/mean", "acc/sampled", "len/all", "len/correct", "groups/zero_signal_frac",
                  "reward/group_std", "len/truncated_frac", "samples/step"):
            assert rank_metrics[k] == pytest.approx(want[k], rel=1e-6), k


WHOLE_BATCH = {"reinforce_pp": dict(adv_estimator="reinforce_pp"),
               "reinforce_pp_baseline": dict(adv_estimator="reinforce_pp_baseline"),
               "gpg": dict(adv_estimator="gpg"),
               "grpo,std_scope=batch": dict(std_scope="batch")}


def test_estimators_with_batch_statistics_give_the_full_batch_result_on_two_ranks(setup):
    """REINFORCE++ (its whitening), its baseline variant, GPG's alpha and the batch's std read every
    rank's rewards (data_parallel.whole_batch): the 2-rank gradient is the 1-process one. Each rank
    on its own half would compute other advantages, so the comparison can fail."""
    model_state, ref_state, batch = setup
    cfgs = {k: replace(BASE, loss="grpo", **kw) for k, kw in WHOLE_BATCH.items()}
    got = D.toy_first_updates([replace(c, world_size=2) for c in cfgs.values()], *setup, 2)
    half = len(batch.rewards) // 2
    for (key, cfg), g in zip(cfgs.items(), got):
        _assert_same(g, D.toy_first_update(cfg, *setup), f"{key}, 2 ranks")
        setup_ = rl.loss_setup(cfg)
        full = rl.advantages_of(cfg, setup_, None, batch, batch.rewards)
        own = rl.advantages_of(cfg, setup_, None, rl.Batch(*(t[half:] for t in (
            batch.prompts, batch.responses, batch.mask, batch.rollout_logp, batch.rewards)), EOS, PAD), batch.rewards[half:])
        assert float((own - full[half:]).abs().max()) > 0.05, f"{key}: a rank's own half gives the same advantages"


def _whole_batch_rank(rank: int, world_size: int, payload):
    """On a rank: its rows' REINFORCE++ advantages from its own rewards and mask (of its own length)."""
    from course_lib.rl.data_parallel import DataParallel
    rewards, mask = payload["rewards"][rank], payload["mask"][rank]
    batch = rl.Batch(None, None, mask, None, rewards, EOS, PAD)
    dp = DataParallel(rank, world_size, torch.nn.Identity())
    return rl.advantages_of(payload["cfg"], rl.loss_setup(payload["cfg"]), None, batch, rewards, dp)


def test_ranks_whose_responses_differ_in_length_get_the_full_batch_advantages():
    """Each rank pads to its own longest response; the whitening still sees every rank's tokens once."""
    cfg = replace(BASE, loss="grpo", adv_estimator="reinforce_pp")
    rewards = [torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.tensor([1.0, 1.0, 0.0, 1.0])]
    lengths = [torch.tensor([1, 3, 2, 3]), torch.tensor([5, 1, 4, 2])]
    mask = [torch.arange(int(n.max()))[None] < n[:, None] for n in lengths]          # [4, 3] and [4, 5]
    got = run_ranks(_whole_batch_rank, 2, {"cfg": cfg, "rewards": rewards, "mask": mask})
    all_mask = torch.arange(5)[None] < torch.cat(lengths)[:, None]                   # [8, 5]
    full = rl.advantages_of(cfg, rl.loss_setup(cfg), None, rl.Batch(None, None, all_mask, None, None, EOS, PAD),
                                 torch.cat(rewards))
    assert got[0].shape == (4, 3) and got[1].shape == (4, 5)
    torch.testing.assert_close(torch.cat([torch.nn.functional.pad(got[0], (0, 2)), got[1]]), full,
                               rtol=0, atol=1e-6)


def test_train_distributed_gives_each_rank_its_share_of_the_prompts():
    """A whole run on 2 gloo ranks: each rank samples prompts_per_step / 2 groups, so a step's sampling
    metrics (all-gathered) count the configured batch once, and the run learns (GPG's alpha over both)."""
    cfg = RunConfig(steps=2, prompts_per_step=4, group_size=4, n_layer=1, d_model=16, n_head=2, warm_steps=0,
                    heldout_questions=16, eval_every=2, device="cpu", world_size=2, adv_estimator="gpg",
                    overlong_penalty=True, overlong_cache=4)
    h = trainer.train_distributed(cfg, timeout_s=120)
    assert [r["samples/step"] for r in h.rows[1:]] == [16, 16]
    assert h.rows[-1]["samples/drawn"] == 32 and h.rows[-1]["grad/norm"] > 0
