"""The translations mean what the course means: crafted batches through each framework's own code.

- Corrections: token ratios 0.001, 0.4, 0.9, 1, 1.5, 3, 500 and responses whose product of ratios falls
  on either side of the cap go through verl's rollout-correction step (configured by the composed
  to_verl overrides), TRL's importance-sampling block of GRPOTrainer (configured by GRPOConfig(**to_trl))
  and course_lib.corrections (cap 2): the same tokens are kept, with the same weights, and (verl) the same
  tokens stay in the loss's mask.
- Losses: every loss case of frameworks.translation_cases, computed by the verl policy loss its
  translation selects, with the actor config verl builds from the composed overrides, equals course_lib's
  loss with the toy's knobs (values and gradients).
- The overlong penalty: the reward manager verl's reward loop picks from the composed translation
  scores every response length as course_lib.rewards.overlong_penalty does.
- The entropy bonus: TRL's own block of GRPOTrainer takes the micro-batch's token mean whatever the
  loss_type; verl's agg_loss, which its loss applies to the entropy with the policy loss's mode, is
  course_lib's aggregation in that mode.
"""
from __future__ import annotations

import math
import types

import pytest
import torch

from conftest import REASON, TRL_MACHINE, VERL_MACHINE, trl_source_block

pytest.importorskip("trl", reason=REASON)
pytest.importorskip("verl", reason=REASON)
from trl import GRPOConfig                                          # noqa: E402
from verl import DataProto                                          # noqa: E402
from verl.trainer.ppo import core_algos as ca                       # noqa: E402
from verl.trainer.ppo import rollout_corr_helper as rc              # noqa: E402
from verl.utils.config import omega_conf_to_dataclass               # noqa: E402

from course_lib import corrections                                  # noqa: E402
from course_lib import frameworks as fw                             # noqa: E402
from course_lib.rl import loss_setup                       # noqa: E402

CASES = fw.translation_cases()
CORRECTION_CASES = [label for label, c in CASES.items() if c.correction != "none"]
TOKEN_RATIOS = [0.001, 0.4, 0.9, 1.0, 1.5, 3.0, 500.0]
# responses for the sequence level (cap 2): products 2.25, 4.5, 0.5, 0.36 and 1.35
SEQ_RATIOS = [[1.5, 1.5], [1.5, 3.0], [500.0, 0.001], [0.4, 0.9], [0.9, 1.5]]


def crafted():
    """old_logp, rollout_logp [B, T] with exactly those ratios pi_old / pi_rollout, and the mask."""
    rows = [TOKEN_RATIOS] + SEQ_RATIOS
    T = max(map(len, rows))
    mask = torch.tensor([[t < len(r) for t in range(T)] for r in rows])
    log_ratio = torch.tensor([[math.log(r[t]) if t < len(r) else 0.0 for t in range(T)] for r in rows],
                             dtype=torch.float64)
    rollout = -torch.linspace(0.5, 3.0, mask.numel(), dtype=torch.float64).view(mask.shape)
    return rollout + log_ratio, rollout, mask


def course_weights(cfg):
    old, rollout, mask = crafted()
    return corrections.correction_weights(cfg.correction, old, rollout, mask, cfg.correction_cap,
                                          cfg.correction_level)


def verl_weights(cfg, verl_compose):
    """verl's own correction step on the batch, configured by the composed translation: the weights
    times the (possibly edited) response mask, and that mask."""
    composed = verl_compose(fw.verl_text(cfg).split("\n# notes:")[0].split(" \\\n") + VERL_MACHINE)
    old, rollout, mask = crafted()
    batch = DataProto.from_dict(tensors={"old_log_probs": old, "rollout_log_probs": rollout,
                                         "response_mask": mask.double()})
    batch, _ = rc.compute_rollout_correction_and_add_to_batch(batch, composed.algorithm.rollout_correction)
    kept = batch.batch["response_mask"]
    return batch.batch["rollout_is_weights"] * kept, kept.bool()


def trl_weights(cfg):
    """TRL's importance-sampling block of GRPOTrainer, run with the GRPOConfig of the translation."""
    conf = GRPOConfig(**{k: v for k, v, _ in fw.to_trl(cfg) if not k.startswith("#")}, **TRL_MACHINE)
    old, rollout, mask = crafted()
    trainer = types.SimpleNamespace(
        use_vllm=conf.use_vllm, vllm_importance_sampling_correction=conf.vllm_importance_sampling_correction,
        vllm_importance_sampling_mode=conf.vllm_importance_sampling_mode,
        vllm_importance_sampling_clip_max=conf.vllm_importance_sampling_clip_max,
        vllm_importance_sampling_clip_min=conf.vllm_importance_sampling_clip_min)
    env = {"self": trainer, "torch": torch, "math": math, "completion_mask": mask.long(), "tool_mask": None,
           "old_per_token_logps": old, "sampling_per_token_logps": rollout}
    exec(trl_source_block("self.use_vllm and self.vllm_importance_sampling_correction",
                          "vllm_importance_sampling_ratio"), env)
    return env["vllm_importance_sampling_ratio"] * mask                 # TRL's loss multiplies, then masks


@pytest.mark.parametrize("label", CORRECTION_CASES)
def test_verl_and_trl_keep_the_courses_tokens_with_the_courses_weights(label, verl_compose):
    cfg = CASES[label]
    ours = course_weights(cfg)
    theirs_verl, kept = verl_weights(cfg, verl_compose)
    theirs_trl = trl_weights(cfg)
    torch.testing.assert_close(theirs_verl, ours, rtol=1e-12, atol=0)
    torch.testing.assert_close(theirs_trl, ours, rtol=1e-12, atol=0)
    _, _, mask = crafted()
    assert torch.equal(kept, mask)                    # no token leaves the mask: zero weight instead


def test_the_crafted_cases_reach_both_sides_of_the_cap():
    mis_token, mis_seq = CASES["mis token"], CASES["mis sequence"]
    w = course_weights(mis_token)[0]
    assert mis_token.correction_cap == mis_seq.correction_cap == 2.0
    assert [float(x) > 0 for x in w] == [True, True, True, True, True, False, False]  # 3, 500 dropped
    ws = course_weights(mis_seq)[1:, 0]
    assert [float(x) > 0 for x in ws] == [False, False, True, True, True]             # 2.25, 4.5 dropped
    assert float(course_weights(CASES["tis token"])[0, 6]) == 2.0                      # 500 truncated


def test_verls_rejection_bounds_apply_to_the_inverse_ratio():
    # why the translation uses IcePop: verl's k1 rejection reads log(pi_rollout / pi_train), so the
    # bounds written as the course's "0.001 to 2" keep 3 and 500, which the course drops, and drop
    # 0.001 and 0.4, which it keeps; the bounds the right way round are 1/2 to (no upper bound)
    old, rollout, mask = crafted()
    kept, _ = rc.compute_rollout_rejection_mask(old - rollout, mask.double(), "token_k1", "0.001_2.0")
    assert [bool(x) for x in kept[0]] == [False, False, True, True, True, True, True]
    inverse, _ = rc.compute_rollout_rejection_mask(old - rollout, mask.double(), "token_k1", "0.5_1e9")
    assert [bool(x) for x in inverse[0]] == [True, True, True, True, True, False, False]


# ---- losses -------------------------------------------------------------------------------------
LOSS_CASES = [label for label, c in CASES.items()
              if c.old_logp_source == "learner" and c.kl_coef == 0 and c.correction == "none"
              and not any(k == "# policy loss" for k, _, _ in fw.to_verl(c))]    # VESPO: no verl mode, a note


def loss_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    B, T = 8, 6
    lengths = torch.tensor([1, 6, 3, 4, 6, 2, 5, 6])
    mask = torch.arange(T)[None, :] < lengths[:, None]
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    logp = old + 0.4 * torch.randn(B, T, generator=g, dtype=torch.float64)
    logp[1, :2] = old[1, :2] + torch.tensor([1.5, -1.5], dtype=torch.float64)     # beyond dual clip 3
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    return mask, old, logp, adv


@pytest.mark.parametrize("label", LOSS_CASES)
def test_the_verl_loss_a_translation_selects_equals_the_courses(label, verl_compose):
    cfg = CASES[label]
    composed = verl_compose(fw.verl_text(cfg).split("\n# notes:")[0].split(" \\\n") + VERL_MACHINE)
    actor = omega_conf_to_dataclass(composed.actor_rollout_ref.actor)
    mode = composed.actor_rollout_ref.actor.policy_loss.loss_mode
    mask, old, logp, adv = loss_batch()
    setup = loss_setup(cfg)
    x1 = logp.clone().requires_grad_(True)
    x2 = logp.clone().requires_grad_(True)
    ours, _ = setup.fn(x1, old, adv, mask, **setup.knobs)
    theirs, _ = ca.get_policy_loss_fn(mode)(old, x2, adv[:, None] * mask, mask.double(),
                                            loss_agg_mode=actor.loss_agg_mode, config=actor)
    ours.backward()
    theirs.backward()
    assert abs(float(ours - theirs)) < 1e-8, f"{label}: loss {float(ours):.6g} vs verl {float(theirs):.6g}"
    assert float((x1.grad - x2.grad).abs().max()) < 1e-8, label


# ---- the overlong penalty -------------------------------------------------------------------------
def test_the_reward_manager_the_overlong_translation_selects_gives_the_courses_penalty(verl_compose):
    """verl's reward loop picks its manager by `reward.reward_manager.name` and reads the buffer from
    `reward.reward_kwargs`: built from the composed translation, it scores every response length as
    course_lib.rewards.overlong_penalty does (the verifier's own score set to 0)."""
    import numpy as np
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    from course_lib import rewards
    cfg = CASES["overlong penalty"]
    composed = verl_compose(fw.verl_text(cfg).split("\n# notes:")[0].split(" \\\n") + VERL_MACHINE)
    manager_cls = get_reward_manager_cls(composed.reward.reward_manager.name)
    tokenizer = types.SimpleNamespace(decode=lambda ids, skip_special_tokens=True: "")
    manager = manager_cls(composed, tokenizer, compute_score=lambda **kw: 0.0)
    L = cfg.max_new_tokens
    lengths = torch.arange(1, L + 1)
    theirs = []
    for n in lengths.tolist():
        data = DataProto.from_dict(
            tensors={"prompts": torch.ones(1, 2, dtype=torch.long), "responses": torch.ones(1, L, dtype=torch.long),
                     "attention_mask": torch.cat([torch.ones(1, 2), (torch.arange(L) < n).float()[None]], 1).long()},
            non_tensors={"data_source": np.array(["toy"], dtype=object),
                         "reward_model": np.array([{"ground_truth": ""}], dtype=object)})
        theirs.append(float(manager.loop.run_until_complete(manager.run_single(data))["reward_score"]))
    ours = rewards.overlong_penalty(lengths, L, cfg.overlong_cache)
    torch.testing.assert_close(torch.tensor(theirs, dtype=ours.dtype), ours, rtol=0, atol=1e-6)
    assert float(ours.min()) < 0 and float(ours[0]) == 0                    # both sides of the buffer


# ---- the entropy bonus ------------------------------------------------------------------------------
def entropy_batch():
    """Per-token entropies [4, 6] and a mask with lengths 1, 6, 3, 6 (unequal: the modes differ)."""
    g = torch.Generator().manual_seed(7)
    mask = torch.arange(6)[None, :] < torch.tensor([1, 6, 3, 6])[:, None]
    return torch.rand(4, 6, generator=g, dtype=torch.float64) * 2, mask


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_trls_entropy_bonus_is_the_micro_batchs_token_mean_whatever_the_loss_type(loss_type):
    # TRL's own block of GRPOTrainer._compute_loss, run on crafted entropies: the bonus is the token mean
    # of the micro-batch divided by the accumulation steps, for every loss_type (what chapter 11 and
    # frameworks.KNOBS state), not the loss_type's aggregation
    from collections import defaultdict

    from course_lib.aggregation import aggregate
    conf = GRPOConfig(loss_type=loss_type, entropy_coef=0.1, gradient_accumulation_steps=2, **TRL_MACHINE)
    entropies, mask = entropy_batch()
    trainer = types.SimpleNamespace(
        _entropy_bonus_enabled=True, entropy_coef=conf.entropy_coef, use_adaptive_entropy=conf.use_adaptive_entropy,
        current_gradient_accumulation_steps=conf.gradient_accumulation_steps, loss_type=conf.loss_type,
        _metrics=defaultdict(lambda: defaultdict(list)), args=conf,
        accelerator=types.SimpleNamespace(gather=lambda t: t, sync_gradients=False))
    env = {"self": trainer, "mode": "train", "entropies": entropies, "mask": mask.double(), "entropy_mask": None,
           "loss": torch.zeros((), dtype=torch.float64), "policy_loss": torch.zeros(()), "torch": torch}
    exec(trl_source_block("self._entropy_bonus_enabled", "entropy_loss"), env)
    token_mean = float(aggregate(entropies, mask, "token-mean")) / 2
    assert float(env["entropy_loss"]) == pytest.approx(token_mean, rel=1e-12)
    assert float(env["loss"]) == pytest.approx(-0.1 * token_mean, rel=1e-12)
    assert abs(float(aggregate(entropies, mask, "seq-mean-token-mean")) / 2 - token_mean) > 0.01


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_verls_entropy_bonus_is_aggregated_like_its_policy_loss(mode):
    # verl's loss (workers/utils/losses.py) passes the entropy through agg_loss with the policy loss's
    # loss_agg_mode: on one rank that is course_lib's aggregation in the same mode
    import inspect

    from verl.workers.utils import losses as vl

    from course_lib.aggregation import aggregate
    src = inspect.getsource(vl)
    assert "loss_mat=entropy, loss_mask=response_mask, loss_agg_mode=loss_agg_mode" in src
    entropies, mask = entropy_batch()
    got = ca.agg_loss(loss_mat=entropies, loss_mask=mask.double(), loss_agg_mode=mode)
    # verl's per-response mean divides by (count + 1e-8): agreement to 1e-8 relative, not to rounding
    assert float(got) == pytest.approx(float(aggregate(entropies, mask, mode)), rel=1e-7)
