"""The toy trainer's advantage estimators: one RL step of ``train`` hands the loss the advantages that
tests/reference.py's slow loops give for that step's batch (the estimators of course_lib.advantages,
which tests/test_framework_methods.py checks against the same loops)."""
import copy
from dataclasses import replace

import pytest
import torch

import reference as ref
from course_lib import losses, rl
from course_lib.rl import RunConfig, loss_step, trainer
from course_lib.rl.config import CHOICES
from course_lib.rl import registry
from course_lib.toy.policy import sample
from course_lib.toy.task import correctness

pytestmark = pytest.mark.usefixtures("one_thread")      # tests/conftest.py

# DAPO's overlong penalty makes the reward length-dependent: signal in every group, ties rare, and
# OPO's length weights matter; a warm start short enough that some answers are right
ONE_STEP = RunConfig(steps=1, prompts_per_step=8, group_size=4, n_layer=1, d_model=32, n_head=2,
                     warm_steps=40, warm_target=None, warm_lr=1e-2, heldout_questions=64, eval_every=1,
                     lr=3e-3, warmup_steps=1, device="cpu", overlong_penalty=True, overlong_cache=4)


def _last_token(rewards, mask):
    """An outcome reward on the last valid token of its row, by loops."""
    out = [[0.0] * len(row) for row in mask]
    for b, row in enumerate(mask):
        last = max(t for t, valid in enumerate(row) if valid)
        out[b][last] = rewards[b]
    return out


def _greedy_rewards(cfg, model, prompts):
    """ReMax's baseline by hand: the greedy answer's correctness plus its overlong penalty, per group."""
    roll = sample(model, prompts[::cfg.group_size], cfg.max_new_tokens, greedy=True)
    ok = correctness(prompts[::cfg.group_size], roll.responses).tolist()
    n = roll.mask.sum(dim=1).tolist()
    shaped = [c + ref.overlong_penalty(k, cfg.max_new_tokens, cfg.overlong_cache) for c, k in zip(ok, n)]
    return [s for s in shaped for _ in range(cfg.group_size)]


def _expected(name, cfg, model, batch):
    G, r, m = cfg.group_size, batch.rewards.tolist(), batch.mask.tolist()
    return {
        "grpo": lambda: ref.group_advantages(r, G),
        "rloo": lambda: ref.rloo_advantages(r, G),
        "reinforce_pp": lambda: ref.reinforce_pp(_last_token(r, m), m, 1.0),
        "reinforce_pp_baseline": lambda: ref.reinforce_pp_baseline(r, m, G),
        "remax": lambda: ref.remax(_last_token(r, m), _greedy_rewards(cfg, model, batch.prompts), m),
        "opo": lambda: ref.opo(r, G, [sum(row) for row in m]),
        "passk": lambda: ref.passk(r, G),
        "gpg": lambda: ref.gpg(r, G),
    }[name]()


def _one_step(cfg, monkeypatch):
    """Run one RL step; return what the loss received (adv, rows) and the batch and policy it came from."""
    seen = {}
    real_targets, real_policy_loss = loss_step.targets, trainer.policy_loss

    def spy_targets(c, setup, model, ref_model, batch, **kw):
        seen.update(model=copy.deepcopy(model), batch=batch)        # the policy the advantages saw
        return real_targets(c, setup, model, ref_model, batch, **kw)

    def spy_policy_loss(c, setup, logp, batch, tg, rows, logp_all=None):
        seen["rows"] = rows
        return real_policy_loss(c, setup, logp, batch, tg, rows, logp_all)

    def recording_grpo(logp, old_logp, adv, mask, **kw):
        seen["adv"] = adv.detach().clone()
        return losses.grpo_loss(logp, old_logp, adv, mask, **kw)

    monkeypatch.setattr(loss_step, "targets", spy_targets)
    monkeypatch.setattr(trainer, "policy_loss", spy_policy_loss)
    trainer.train(replace(cfg, loss=recording_grpo), progress=False, dtype=torch.float64)
    return seen


@pytest.mark.parametrize("name", CHOICES["adv_estimator"])
def test_one_step_hands_the_loss_the_estimators_advantages_of_its_batch(name, monkeypatch):
    cfg = replace(ONE_STEP, adv_estimator=name)
    seen = _one_step(cfg, monkeypatch)
    batch, rows = seen["batch"], seen["rows"]
    assert len(set(batch.mask.sum(dim=1).tolist())) > 1, "the batch should mix response lengths"
    want = torch.tensor(_expected(name, cfg, seen["model"], batch), dtype=torch.float64)[rows]
    got = seen["adv"]
    assert got.shape == want.shape, f"{name}: adv {tuple(got.shape)}, expected {tuple(want.shape)}"
    assert torch.allclose(got, want, rtol=1e-9, atol=1e-9), (
        f"{name}: largest difference {float((got - want).abs().max()):.3g}")
    assert (got != 0).any(), f"{name}: every advantage is 0, the comparison proves nothing"


def test_remax_baseline_is_the_greedy_answer_not_a_sampled_one(monkeypatch):
    cfg = replace(ONE_STEP, adv_estimator="remax")
    seen = _one_step(cfg, monkeypatch)
    batch, G = seen["batch"], cfg.group_size
    greedy = _greedy_rewards(cfg, seen["model"], batch.prompts)
    first_sampled = [r for r in batch.rewards[::G].tolist() for _ in range(G)]
    assert greedy != first_sampled, "the greedy and the first sampled answers score alike: no test"
    wrong = torch.tensor(ref.remax(_last_token(batch.rewards.tolist(), batch.mask.tolist()), first_sampled,
                                   batch.mask.tolist()), dtype=torch.float64)[seen["rows"]]
    assert not torch.allclose(seen["adv"], wrong)


def test_an_unknown_estimator_is_refused_with_the_allowed_ones():
    with pytest.raises(ValueError, match="adv_estimator must be one of .*'opo'"):
        replace(ONE_STEP, adv_estimator="gdpo")


def test_remax_grades_its_greedy_answer_with_the_verifier_that_pays_the_reward(monkeypatch):
    """cfg.verifier pays the sampled answers' reward, so it grades ReMax's greedy baseline too. Here
    the lenient verifier is replaced by one that passes every answer; the exact check passes few or
    none of a fresh policy's greedy answers."""
    from course_lib.toy import task as T
    monkeypatch.setitem(T.VERIFIERS, "contains", lambda prompts, responses: torch.ones(len(prompts)))
    cfg = replace(ONE_STEP, adv_estimator="remax", verifier="contains", overlong_penalty=False)
    G = cfg.group_size
    model = rl.build_model(cfg)
    prompts = registry.make_task(cfg).prompts("train")[:cfg.prompts_per_step].repeat_interleave(G, dim=0)   # [B, Lp]
    batch = rl.Batch(prompts, None, None, None, torch.zeros(len(prompts)), model.eos_id, model.pad_id)
    greedy = sample(model, prompts[::G], cfg.max_new_tokens, greedy=True)
    assert correctness(prompts[::G], greedy.responses).sum() < cfg.prompts_per_step / 2
    assert rl.remax_baseline(cfg, model, batch).tolist() == [1.0] * len(prompts)
