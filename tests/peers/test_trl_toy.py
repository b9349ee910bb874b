"""The toy in TRL's own GRPOTrainer (benchmarks/trl_toy.py): on one prepared batch, the first step's loss
and gradient are course_lib's.

The batch: 8 training prompts x G = 8 responses, the correct answer or (half of them) a plausible wrong
one of another length (task.imperfect_answers), scored by the course's verifier. TRL's side is TRL's
code from the tokenised prompt on: GRPOTrainer._generate_and_score_completions (its generation call
replaced by the prepared responses) tokenises, pads, calls the reward function, computes the group
advantages, and GRPOTrainer.compute_loss gives the loss of the GPT-2 copy of the toy's policy, built by
GRPOConfig(**frameworks.to_trl(cfg)). The course's side is the toy trainer's own first step
(trainer.targets, trainer.policy_loss) on the TinyGPT with the same weights, with TRL's one convention
that differs: the std in the advantage's denominator plus 1e-4 (course_lib's default 1e-6). Both in
float32 (TRL's log-probs are float32 whatever the model's dtype). A planted bug (the advantage's sign,
another aggregation) must break the agreement. And the facts that keep verl's trainer from a step here.
"""
from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from conftest import REASON, write_record

pytest.importorskip("trl", reason=REASON)
from course_lib import advantages                                            # noqa: E402
from course_lib.rl.config import make_config                               # noqa: E402
from course_lib.toy.task import EOS, PAD, AdditionTask, correctness, imperfect_answers, response_mask   # noqa: E402
from course_lib.rl import (Batch, build_model, learner_logp, loss_setup, policy_loss,   # noqa: E402
                                   targets)
from course_lib.toy.warm_start import warm_start                                  # noqa: E402

spec = importlib.util.spec_from_file_location("trl_toy",
                                              Path(__file__).resolve().parents[2] / "benchmarks" / "trl_toy.py")
trl_toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trl_toy)

BASE = make_config("smoke", warm_steps=60, warm_target=None)      # a short warm start: a non-uniform policy
CASES = {"grpo (the smoke config)": BASE, "dapo": replace(BASE, loss="dapo"),
         "dr_grpo": replace(BASE, loss="dr_grpo")}
P, G = 8, 8
# TRL computes rewards, advantages and (in its fused LM head, whatever the model's dtype) log-probs in
# float32, so both sides run in float32, the precision both train in, and agree to its rounding
TOL = 1e-6                  # advantages and loss, absolute
GRAD_TOL = 1e-5             # gradients, relative to the largest gradient entry


def prepared_batch(cfg) -> Batch:
    g = torch.Generator().manual_seed(7)
    prompts = AdditionTask().prompts("train")[:P].repeat_interleave(G, dim=0)         # [B, 6]
    responses = imperfect_answers(prompts, 0.5, g, cfg.max_new_tokens)                # [B, T], PAD after EOS
    mask = response_mask(responses)
    rewards = correctness(prompts, responses)
    assert 0 < rewards.mean() < 1 and advantages.signal_groups(rewards, G).sum() >= P // 2
    return Batch(prompts, responses, mask, torch.zeros(mask.shape), rewards, EOS, PAD)


def course_first_step(cfg, state, batch, adv=None, bug=None, ref_state=None):
    """The toy trainer's first step on the batch: (loss, {GPT-2 name: gradient}, advantages). ``adv``:
    advantages to use instead of the course's own; ``ref_state``: pi_ref's weights (default: the policy's)."""
    setup = loss_setup(cfg)
    model = build_model(cfg)
    model.load_state_dict(state)
    ref = model
    if ref_state is not None:
        ref = build_model(cfg)
        ref.load_state_dict(ref_state)
    tg, _ = targets(cfg, setup, model, ref, batch)
    tg.adv = advantages.group_advantages(batch.rewards, G, scale=setup.std_scaling, eps=1e-4)   # TRL's eps
    if adv is not None:
        tg.adv = adv
    if bug == "advantage sign":
        tg.adv = -tg.adv
    if bug == "aggregation":
        setup = replace(setup, knobs={**setup.knobs, "agg": "seq-mean-token-sum"})
    logp, _ = learner_logp(model, batch.prompts, batch.responses, cfg.temperature, cfg.precision)
    loss, *_ = policy_loss(cfg, setup, logp, batch, tg, torch.arange(len(batch.rewards)))
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    for name in ("tok.weight", "head.weight"):                    # PAD's rows: never used, no gradient
        assert float(grads[name][PAD].abs().max()) == 0.0
    return float(loss.detach()), trl_toy.tiny_to_gpt2(grads, cfg), tg.adv


def trl_first_step(cfg, state, batch, tmp_path, ref_state=None, **args):
    """TRL's GRPOTrainer on the same batch: (loss, {name: gradient}, advantages). ``ref_state``: with a KL
    term, the weights of the reference TRL builds (it would load the policy's from the model's path, which
    the in-memory GPT-2 has not); ``args``: GRPOConfig fields set after the translation's."""
    import trl.trainer.grpo_trainer as grpo_trainer
    with pytest.MonkeyPatch.context() as mp:
        if ref_state is not None:
            mp.setattr(grpo_trainer, "create_model_from_path",
                       lambda *a, **k: trl_toy.to_gpt2(ref_state, cfg))
        trainer = trl_toy.trl_trainer(cfg, state, 1, str(tmp_path))
    for name, value in args.items():
        setattr(trainer.args, name, value)
    responses = [[int(t) for t in row if t != PAD] for row in batch.responses]
    trainer._generate_single_turn = lambda prompt_ids, *a, **k: (responses, None)   # the prepared batch
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    inputs = trainer._generate_and_score_completions([{"prompt": t} for t in trl_toy.prompt_text(batch.prompts)])
    assert inputs["completion_ids"].shape[0] == len(responses)
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    return float(loss.detach()), {n: p.grad for n, p in trainer.model.named_parameters()}, inputs["advantages"]


@pytest.fixture(scope="module")
def state():
    torch.manual_seed(0)
    return warm_start(BASE, torch.device("cpu"))[0]


RESULTS: dict = {}


@pytest.mark.parametrize("label", CASES)
def test_trls_first_step_is_the_course_trainers(label, state, tmp_path):
    cfg = CASES[label]
    batch = prepared_batch(cfg)
    t_loss, t_grad, t_adv = trl_first_step(cfg, state, batch, tmp_path)
    c_loss, c_grad, c_adv = course_first_step(cfg, state, batch)                 # the course's advantages
    s_loss, s_grad, _ = course_first_step(cfg, state, batch, adv=t_adv)          # TRL's advantages
    assert set(c_grad) == set(t_grad)
    scale = max(float(g.abs().max()) for g in t_grad.values())
    assert scale > 1e-3                                            # a real gradient, not two zeros
    RESULTS[label] = {
        "loss_type": trainer_loss_type(cfg), "trl_loss": t_loss, "course_loss": c_loss,
        "largest_grad": scale,
        "d_advantage": float((c_adv - t_adv).abs().max()),
        "d_loss": abs(c_loss - t_loss), "d_grad": grad_gap(c_grad, t_grad),
        "d_loss_same_adv": abs(s_loss - t_loss), "d_grad_same_adv": grad_gap(s_grad, t_grad)}
    r = RESULTS[label]
    assert r["d_advantage"] < TOL and r["d_loss"] < TOL and r["d_grad"] < GRAD_TOL * scale, r
    assert r["d_loss_same_adv"] < TOL and r["d_grad_same_adv"] < GRAD_TOL * scale, r


def grad_gap(a: dict, b: dict) -> float:
    return max(float((a[n] - b[n]).abs().max()) for n in b)


def trainer_loss_type(cfg) -> str:
    return next(v for k, v, _ in trl_toy.fw.to_trl(cfg) if k == "loss_type")


@pytest.mark.parametrize("bug", ["advantage sign", "aggregation"])
def test_a_planted_bug_breaks_the_agreement(bug, state, tmp_path):
    cfg = CASES["dapo"]
    batch = prepared_batch(cfg)
    t_loss, t_grad, t_adv = trl_first_step(cfg, state, batch, tmp_path)
    c_loss, c_grad, _ = course_first_step(cfg, state, batch, adv=t_adv, bug=bug)
    assert grad_gap(c_grad, t_grad) > 100 * GRAD_TOL * max(float(g.abs().max()) for g in t_grad.values())


KL_CFG = replace(BASE, kl_coef=0.5)        # large enough that the KL term moves the gradient


def test_trls_kl_term_is_the_toys_k3_under_the_translation(state, tmp_path):
    """With a KL term, to_trl's GRPOConfig (``beta``, ``use_bias_correction_kl=False``) gives TRL's loss the
    toy's k3 penalty: against a reference that differs from the policy, TRL's first step is the course's to
    float32 rounding. TRL's own default (``use_bias_correction_kl=True``: k3 times the ratio, whose gradient
    is the reverse KL's) gives another gradient."""
    batch = prepared_batch(KL_CFG)
    g = torch.Generator().manual_seed(11)
    ref_state = {k: v + 0.1 * v.std() * torch.randn(v.shape, generator=g) if v.is_floating_point() and v.numel() > 1
                 else v for k, v in state.items()}
    t_loss, t_grad, t_adv = trl_first_step(KL_CFG, state, batch, tmp_path / "translated", ref_state)
    assert trl_toy.trl_settings(KL_CFG, 1, 0, "unused")["use_bias_correction_kl"] is False
    c_loss, c_grad, _ = course_first_step(KL_CFG, state, batch, adv=t_adv, ref_state=ref_state)
    n_loss, n_grad, _ = course_first_step(KL_CFG, state, batch, adv=t_adv)      # pi_ref = the policy: no KL
    scale = max(float(x.abs().max()) for x in t_grad.values())
    assert grad_gap(n_grad, t_grad) > 100 * GRAD_TOL * scale             # the KL term moves the gradient
    assert abs(c_loss - t_loss) < TOL and grad_gap(c_grad, t_grad) < GRAD_TOL * scale
    d_loss, d_grad, _ = trl_first_step(KL_CFG, state, batch, tmp_path / "default", ref_state,
                                       use_bias_correction_kl=True)
    assert abs(d_loss - t_loss) < TOL                                    # the ratio is 1 in value ...
    assert grad_gap(d_grad, t_grad) > 100 * GRAD_TOL * scale             # ... not in gradient


def test_record(state):
    """Store the agreement for chapter 09 (after the cases above ran)."""
    import transformers
    import trl
    if len(RESULTS) == len(CASES):
        write_record("trl_first_step.json", {"trl": trl.__version__, "transformers": transformers.__version__,
                                             "torch": torch.__version__, "batch": f"{P} prompts x G = {G}",
                                             "tolerance": TOL, "cases": RESULTS})


def test_verls_trainer_has_no_rollout_that_runs_here():
    """Why verl's trainer runs no step here: its rollout is an inference server, vLLM, SGLang or
    TensorRT-LLM, and none of the three engines is installed; the in-package transformers sampler
    (HFRollout) is not registered, and the config accepts only the async (server) mode."""
    pytest.importorskip("verl", reason=REASON)
    from verl.workers.config import RolloutConfig
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY, get_rollout_class
    from verl.workers.rollout.replica import RolloutReplicaRegistry
    assert sorted(_ROLLOUT_REGISTRY) == [("sglang", "async"), ("trtllm", "async"), ("vllm", "async")]
    assert sorted(RolloutReplicaRegistry._registry) == ["sglang", "trtllm", "vllm"]
    with pytest.raises(AssertionError, match="Rollout hf with mode async not found"):
        get_rollout_class("hf", "async")
    with pytest.raises(ValueError, match="sync' has been removed"):
        RolloutConfig(name="hf", mode="sync")
    assert all(importlib.util.find_spec(engine) is None for engine in ("vllm", "sglang", "tensorrt_llm"))
