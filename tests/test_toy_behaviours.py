"""RunConfig knobs whose silent removal no other test noticed: the RL seed, the device and thread count,
the arithmetic of every forward (warm start, sampler, held-out greedy decoding, learner), the policy's
heads, the warm start's knobs, the sampler's temperature and logits noise, and dynamic sampling's cap on
rounds. Each test fails when its knob is read nowhere (planted one at a time: the seed fixed at 0,
set_num_threads skipped, "fp32" in one forward, n_head fixed at 4, each warm-start knob at its default,
the sampler at temperature 1, logits_noise at 0.5, max_sampling_rounds at 4).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import pytest
import torch

from course_lib import rl
from course_lib.rl import registry
from course_lib.toy import task as T
from course_lib.toy import warm_start as W
from course_lib.rl import trainer
from course_lib.rl.config import RunConfig
from course_lib.toy.policy import TinyGPT

pytestmark = pytest.mark.usefixtures("one_thread")      # tests/conftest.py

TINY = RunConfig(steps=1, prompts_per_step=4, group_size=4, n_layer=1, d_model=16, n_head=2, warm_steps=0,
                 warm_target=None, heldout_questions=16, eval_every=1, device="cpu")


def _batches(cfg, monkeypatch) -> list:
    """Run ``cfg``; return each step's sampled batch."""
    seen = []
    real = trainer.collect

    def spy(*args, **kw):
        got = real(*args, **kw)
        seen.append(got.batch)
        return got
    monkeypatch.setattr(trainer, "collect", spy)
    trainer.train(cfg, progress=False)
    return seen


def test_the_rl_seed_picks_the_prompts_and_samples_and_the_same_seed_repeats_them(monkeypatch):
    a, again, b = (_batches(replace(TINY, seed=s), monkeypatch)[0] for s in (3, 3, 4))
    assert torch.equal(a.prompts, again.prompts) and torch.equal(a.responses, again.responses)
    assert not torch.equal(a.prompts, b.prompts)
    c = _batches(replace(TINY, seed=0), monkeypatch)[0]
    assert not torch.equal(a.prompts, c.prompts)              # a seed is not the default seed either


def test_the_run_lives_on_the_configured_device(monkeypatch):
    batch = _batches(TINY, monkeypatch)[0]
    assert batch.prompts.device.type == batch.rollout_logp.device.type == "cpu"
    if not torch.cuda.is_available():                         # asking for a GPU that is not there
        with pytest.raises(ValueError, match="device='cuda'.*sees no CUDA GPU"):
            trainer.train(replace(TINY, device="cuda"), progress=False)


def test_num_threads_sets_torchs_cpu_threads():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        trainer.train(replace(TINY, num_threads=1), progress=False)
        assert torch.get_num_threads() == 1
        trainer.train(TINY, progress=False)                   # None: left as it is
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


# ---- the arithmetic of every forward -------------------------------------------------------------
def _head_dtypes(cfg, monkeypatch) -> dict:
    """Run ``cfg``; the dtypes of the policy head's outputs, by what ran the forward: "sample" (the
    sampler), "greedy" (held-out accuracy, the warm start's probe) or "teacher" (the warm start's
    supervised steps and every learner or reference forward with or without gradient)."""
    out = {"sample": set(), "greedy": set(), "teacher": set()}
    phase = ["teacher"]
    build, accuracy = TinyGPT.for_config, trainer.heldout_accuracy

    def during(name, fn):
        def wrapped(*args, **kw):
            phase.append(name)
            try:
                return fn(*args, **kw)
            finally:
                phase.pop()
        return wrapped

    def hooked(cls, *args, **kw):
        model = build(*args, **kw)
        model.head.register_forward_hook(lambda mod, a, y: out[phase[-1]].add(y.dtype))
        return model
    monkeypatch.setattr(TinyGPT, "for_config", classmethod(hooked))      # every TinyGPT the run builds
    monkeypatch.setattr(trainer, "collect", during("sample", trainer.collect))     # its forwards: the sampler's
    monkeypatch.setattr(trainer, "heldout_accuracy", during("greedy", accuracy))
    monkeypatch.setattr(W, "heldout_accuracy", during("greedy", accuracy))      # the warm start's probe
    monkeypatch.setattr(W, "_WARM_CACHE", {})                  # run the warm start here, hooked
    trainer.train(cfg, progress=False)
    return out


@pytest.mark.parametrize("sampler_precision, sampler_dtype", [(None, torch.bfloat16), ("fp32", torch.float32)])
def test_every_forward_runs_in_the_configured_precision_and_the_sampler_in_its_own(
        sampler_precision, sampler_dtype, monkeypatch):
    cfg = replace(TINY, precision="bf16", sampler_precision=sampler_precision, warm_steps=2, warm_target=0.99,
                  warm_batch=8, kl_coef=0.1)
    got = _head_dtypes(cfg, monkeypatch)
    assert got == {"sample": {sampler_dtype}, "greedy": {torch.bfloat16}, "teacher": {torch.bfloat16}}
    assert _head_dtypes(replace(cfg, precision="fp32", sampler_precision=None), monkeypatch) == {
        "sample": {torch.float32}, "greedy": {torch.float32}, "teacher": {torch.float32}}


# ---- the policy ----------------------------------------------------------------------------------
def test_the_policy_has_the_configured_heads():
    """n_head leaves the parameters' shapes alone, so only the function tells it: the trainer's policy
    computes what a TinyGPT with cfg.n_head heads computes, not what another head count does."""
    cfg = replace(TINY, d_model=16, n_head=2)
    model = rl.build_model(cfg)
    seq = T.AdditionTask(heldout_questions=16).prompts("heldout")[:8]                      # [8, 6]
    with torch.no_grad():
        for n_head, same in ((2, True), (4, False)):
            ref = TinyGPT(1, 16, n_head, block_size=model.block_size)
            ref.load_state_dict(model.state_dict())
            assert torch.allclose(model(seq), ref(seq), atol=1e-6) == same, n_head


# ---- the warm start --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Recorded(T.AdditionTask):
    """The addition task, recording each warm-start batch's (size, noise, length)."""
    calls: ClassVar[list] = []

    def warm_answers(self, prompts, noise, generator, max_len):
        self.calls.append((len(prompts), noise, max_len))
        return super().warm_answers(prompts, noise, generator, max_len)


@pytest.fixture
def recorded(monkeypatch):
    monkeypatch.setitem(registry.TASKS, "recorded", lambda cfg: _Recorded(heldout_questions=cfg.heldout_questions))
    monkeypatch.setattr(W, "_WARM_CACHE", {})
    _Recorded.calls.clear()
    return _Recorded.calls


def warm_cfg(**kw) -> RunConfig:
    """The warm start's knobs away from their defaults, on the recording task (``recorded`` registers it)."""
    return replace(TINY, **{**dict(task="recorded", warm_steps=3, warm_batch=12, warm_noise=0.4, warm_lr=1e-3,
                                   max_new_tokens=5), **kw})


def test_the_warm_start_takes_warm_steps_batches_of_warm_batch_with_warm_noise(recorded):
    W.warm_start(warm_cfg())
    assert recorded == [(12, 0.4, 5)] * 3


def test_the_warm_start_stops_once_its_target_is_reached(recorded):
    W.warm_start(warm_cfg(warm_target=0.0))         # reached before the first step
    assert recorded == []
    W.warm_start(warm_cfg(warm_target=1.0))         # never reached: every step
    assert len(recorded) == 3


def test_the_warm_starts_first_step_is_proportional_to_warm_lr(recorded):
    torch.manual_seed(warm_cfg().warm_seed)
    init = rl.build_model(warm_cfg()).state_dict()
    steps = {}
    for lr in (1e-3, 2e-3):
        state, _ = W.warm_start(warm_cfg(warm_steps=1, warm_lr=lr))
        steps[lr] = torch.cat([(state[k] - init[k]).reshape(-1) for k in init])
    size = float(steps[1e-3].abs().max())                       # Adam's first step: lr / 10 (warm-up)
    assert size > 1e-6
    torch.testing.assert_close(steps[2e-3], 2 * steps[1e-3], rtol=0, atol=0.01 * size)   # float32 weights


def test_the_warm_seed_picks_the_warm_start_and_the_same_seed_repeats_it(recorded):
    def warm(seed):
        W._WARM_CACHE.clear()                            # made again, not read from the cache
        return W.warm_start(warm_cfg(warm_seed=seed))[0]
    a, again, b, zero = warm(5), warm(5), warm(6), warm(0)
    assert all(torch.equal(a[k], again[k]) for k in a)
    assert not torch.equal(a["head.weight"], b["head.weight"])
    assert not torch.equal(a["head.weight"], zero["head.weight"])


# ---- the sampler: its temperature, its logits noise -----------------------------------------------
@pytest.mark.parametrize("temperature", [0.5, 1.6])
def test_the_sampler_draws_at_the_configured_temperature(temperature):
    """Without a mismatch the learner's recomputed log-probs, at cfg.temperature, are the sampler's."""
    row = trainer.train(replace(TINY, temperature=temperature), progress=False).rows[1]
    assert row["mismatch/abs_logratio_max"] < 1e-5, row["mismatch/abs_logratio_max"]


def test_more_logits_noise_parts_the_sampler_further_from_the_learner():
    gaps = {s: trainer.train(replace(TINY, mismatch="noise", logits_noise=s), progress=False).rows[1]
            ["mismatch/abs_logratio_p99"] for s in (0.1, 0.5, 2.0)}
    assert gaps[0.1] < gaps[0.5] < gaps[2.0], gaps


# ---- dynamic sampling's cap on rounds --------------------------------------------------------------
@pytest.mark.parametrize("rounds", [2, 3])
def test_dynamic_sampling_draws_at_most_max_sampling_rounds_batches(rounds, monkeypatch):
    """When no group ever has signal (a verifier that fails everything), it draws exactly that many."""
    monkeypatch.setitem(T.VERIFIERS, "contains", lambda prompts, responses: torch.zeros(len(prompts)))
    cfg = replace(TINY, dynamic_sampling=True, max_sampling_rounds=rounds, verifier="contains")
    got = trainer.collect(cfg, rl.build_model(cfg), registry.make_task(cfg).prompts("train"),
                          torch.Generator().manual_seed(1), torch.Generator().manual_seed(2), lambda ctx: 0.0)
    assert got.batch is None and len(got.rewards) == rounds * cfg.batch_size
