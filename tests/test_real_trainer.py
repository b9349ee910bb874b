"""The trainer on the real model (``lm.policy.ChatPolicy``, the ``chat_addition`` task): the policy interface
against ``lm.ChatLM``'s own padded full forward, the task's verifiers and errors, config names, and one learned
batch's gradient against a hand-written GRPO step on ``ChatLM.score`` (a different forward: no shared prompt,
no micro-batches, no targets machinery). A few short replies in float32; the model loads from `make model`'s
folder."""
from dataclasses import replace

import pytest
import torch

from course_lib import lm, losses, rl
from course_lib.advantages import group_advantages
from course_lib.lm.policy import ChatPolicy, build_policy
from course_lib.lm.task import SYSTEM, VERIFIERS, chat_task
from course_lib.rl import trainer
from course_lib.rl.config import RunConfig, make_config
from course_lib.rl.registry import POLICIES, TASKS

SMALL = dict(steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8, micro_batches=2, eval_every=2,
             heldout_pairs=2)                    # 6 held-out questions: a quick evaluation


SIGNAL_SEED = 1          # its first step draws a group whose two replies differ in reward


@pytest.fixture(scope="module")
def policy():
    return build_policy()


def test_the_trainer_hands_back_the_memory_the_real_model_s_steps_free(policy):
    assert policy.returns_freed_memory is True      # rl.device.return_freed_memory after each step


@pytest.fixture(scope="module")
def task():
    return chat_task(make_config("real"))


@pytest.fixture(scope="module")
def batch(policy, task):
    """Two training questions x 2 replies, sampled by the policy, with rewards 1, 0 / 0, 1."""
    prompts = task.prompts("train")[[0, 100]].repeat_interleave(2, dim=0)          # [4, Lp], left-padded
    roll = policy.rollout(prompts, 10, generator=torch.Generator().manual_seed(3))
    return rl.Batch(prompts, roll.responses, roll.mask, roll.rollout_logp, torch.tensor([1.0, 0.0, 0.0, 1.0]),
                         eos_id=policy.eos_id, pad_id=policy.pad_id)


def test_the_task_splits_by_pair_and_its_prompts_are_the_chat_templates(task):
    train, held = task.prompts("train"), task.prompts("heldout")
    assert (len(train), len(held)) == (246, 54)                      # 82 / 18 ordered pairs x 3 wordings
    rows = lm.prompt_rows(held)
    assert rows[0] == lm.chat_ids(task.tokenizer, task._questions["heldout"].texts[0], SYSTEM)
    assert min(map(len, rows)) < held.shape[1] and (held[:, 0] == lm.PROMPT_PAD).any()   # left padding
    assert not {tuple(r) for r in rows} & {tuple(r) for r in lm.prompt_rows(train)}


def test_the_verifiers_read_each_reply_up_to_its_first_eos(task):
    prompts = task.prompts("heldout")[:1].repeat(3, 1)
    text, answer = task.question(lm.prompt_rows(prompts)[0])
    eos = task.tokenizer.eos_token_id
    ids = lambda s: task.tokenizer.encode(s)                                       # noqa: E731
    replies = [ids(f"It is {answer}.") + [eos], ids(f"Answer: {answer + 1}") + [eos] + ids(f" {answer}"),
               ids(f"Answer: {answer}")]
    T = max(map(len, replies))
    responses = torch.tensor([r + [eos] * (T - len(r)) for r in replies])
    assert task.verifiers["exact"](prompts, responses).tolist() == [1.0, 0.0, 1.0]
    assert task.verifiers["format"](prompts, responses).tolist() == [0.0, 1.0, 1.0]


def test_a_verifier_that_raises_names_the_prompt_and_the_reply(task, monkeypatch):
    def broken(reply, answer):
        raise KeyError("boom")
    monkeypatch.setitem(VERIFIERS, "exact", broken)
    prompts = task.prompts("heldout")[:1]
    text, _ = task.question(lm.prompt_rows(prompts)[0])
    reply = task.tokenizer.encode("seven")
    with pytest.raises(ValueError, match="'exact' verifier raised KeyError") as e:
        task.verifiers["exact"](prompts, torch.tensor([reply]))
    assert repr(text) in str(e.value) and "'seven'" in str(e.value)


def test_config_names_the_known_policies_and_tasks():
    known = "\\['smollm2', 'smollm2_lora', 'tiny_gpt'\\]"
    with pytest.raises(ValueError, match=f"policy must be one of {known}, got 'gpt2'"):
        RunConfig(policy="gpt2")
    with pytest.raises(ValueError, match="task must be one of .*'chat_addition'"):
        RunConfig(task="sorting")
    with pytest.raises(ValueError, match="'chat_addition' task's token ids are the 'smollm2' policy's"):
        RunConfig(task="chat_addition", heldout_pairs=20)
    assert tuple(POLICIES) == ("tiny_gpt", "smollm2", "smollm2_lora") and "chat_addition" in TASKS
    assert make_config("real").policy == "smollm2"
    assert make_config("real", policy="smollm2_lora").task == "chat_addition"      # the same token ids
    with pytest.raises(ValueError, match="'addition' task's token ids are the 'tiny_gpt' policy's, got "
                                         "policy='smollm2_lora'"):
        make_config("smoke", policy="smollm2_lora")


def test_the_policy_forward_equals_the_padded_full_forward_at_every_reply_token(policy, batch):
    """The trainer's forward (each prompt once, replies continuing its cache, every row scored to T) against
    ``ChatLM.score``: each row padded on the left and run whole."""
    with torch.no_grad():
        logits = policy(batch.prompts, continuation=batch.responses[:, :-1])                 # [B, T, V]
        logp = torch.log_softmax(logits, -1).gather(2, batch.responses[..., None])[..., 0]
        want, _ = policy.chat.score(lm.prompt_rows(batch.prompts), batch.responses, batch.mask.sum(1))
    assert logits.shape[:2] == batch.responses.shape and logits.dtype == torch.float32
    torch.testing.assert_close(torch.where(batch.mask, logp, 0.0), want, rtol=0, atol=2e-4)
    torch.testing.assert_close(batch.rollout_logp, want, rtol=0, atol=2e-4)     # and the sampler's own


def test_rollout_draws_from_the_generator_and_masks_by_length(policy, task):
    prompts = task.prompts("train")[:2].repeat_interleave(2, dim=0)
    a, b, c = (policy.rollout(prompts, 6, generator=torch.Generator().manual_seed(s)) for s in (5, 5, 6))
    assert torch.equal(a.responses, b.responses) and not torch.equal(a.responses, c.responses)
    ended = ((a.responses == policy.eos_id) & a.mask).any(1)
    lengths = a.mask.sum(1)
    assert torch.equal(lengths[~ended], torch.full_like(lengths[~ended], 6))
    assert (a.rollout_logp[~a.mask] == 0).all() and (a.rollout_logp[a.mask] < 0).all()
    with pytest.raises(ValueError, match="logits_noise"):
        policy.rollout(prompts, 6, logits_noise=0.5)


def test_one_learned_batch_is_the_hand_written_grpo_step(policy, batch):
    """micro-batches, pi_old from each piece's own forward, the shared prompt: the gradient of a plain GRPO
    loss on ``ChatLM.score``'s log-probs (sequence-mean of token means, clip inactive at ratio 1)."""
    cfg = make_config("real", **SMALL, grad_clip=1e9)                   # the raw gradient
    grads = {}

    class Keep(torch.optim.SGD):
        def step(self, closure=None):
            grads["trainer"] = [p.grad.clone() for p in self.param_groups[0]["params"]]

    model = policy.requires_grad_(True)
    opt = Keep(model.parameters(), lr=0.0)
    metrics = trainer.learn(cfg, rl.loss_setup(cfg), model, None, opt, batch, torch.Generator().manual_seed(0),
                            lambda: 0.0, with_ref=False)
    model.zero_grad()
    logp, _ = policy.chat.score(lm.prompt_rows(batch.prompts), batch.responses, batch.mask.sum(1))
    adv = group_advantages(batch.rewards, 2)
    loss, _ = losses.grpo_loss(logp, logp.detach(), adv, batch.mask)
    loss.backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    got = grads["trainer"]
    scale = max(float(w.abs().max()) for w in want)
    assert scale > 1e-3                                                  # a real gradient, not zeros
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=2e-3 * scale)
    total = torch.sqrt(sum((g - w).pow(2).sum() for g, w in zip(got, want))) / torch.sqrt(sum(w.pow(2).sum() for w in want))
    assert float(total) < 1e-3
    assert float(metrics["loss/policy"]) == pytest.approx(float(loss.detach()), abs=1e-6)


def test_each_forward_of_a_real_step_is_as_small_as_the_config_and_the_policy_ask(policy, batch, monkeypatch):
    """The step's peak memory rests on it: each forward with gradient takes a micro-batch's rows (B / micro_batches),
    each forward without gradient at most the policy's ``score_rows`` (8), so a [rows, T, V] float32 logit tensor
    of the 49,152-token vocabulary never exists for the whole batch. Planted: one piece for every micro-batch, or
    ``score_rows`` left at None."""
    big = rl.Batch(batch.prompts.repeat(3, 1), batch.responses.repeat(3, 1), batch.mask.repeat(3, 1),
                   batch.rollout_logp.repeat(3, 1), batch.rewards.repeat(3), eos_id=policy.eos_id, pad_id=policy.pad_id)
    cfg = make_config("real", **{**SMALL, "prompts_per_step": 6, "micro_batches": 3},
                      old_logp_forward="separate")                     # pi_old from forwards without gradient
    seen, score = [], policy.chat.shared_prompt_logits
    monkeypatch.setattr(policy.chat, "shared_prompt_logits",
                        lambda prompts, *a, **kw: seen.append((len(prompts), torch.is_grad_enabled()))
                        or score(prompts, *a, **kw))
    model = policy.requires_grad_(True)
    trainer.learn(cfg, rl.loss_setup(cfg), model, model.reference(), torch.optim.SGD(model.trainable_parameters(),
                  lr=0.0), big, torch.Generator().manual_seed(0), lambda: 0.0, with_ref=False)
    model.zero_grad(set_to_none=True)
    assert [n for n, grad in seen if grad] == [4, 4, 4]
    assert [n for n, grad in seen if not grad] == [policy.score_rows, 12 - policy.score_rows] == [8, 4]


def test_collect_pays_the_exact_verdict_plus_the_format_weight_times_the_format_verdict(policy, task, monkeypatch):
    """The real size's reward: 1 for the right last integer, plus format_weight (0.5) for stating "Answer: <n>",
    on four written replies to one question, the last cut at the budget; and each reply's categories, which the
    step's rows average. Planted: the format term dropped, or its weight ignored; a category misread."""
    cfg = make_config("real", **{**SMALL, "prompts_per_step": 1, "group_size": 4})
    prompt = task.prompts("train")[:1]
    _, answer = task.question(lm.prompt_rows(prompt)[0])
    texts = [f"Answer: {answer}", f"{answer}", f"Answer: {answer + 1}", "I do not know, so let me think about it"]
    ids = [task.tokenizer.encode(t, add_special_tokens=False) + [policy.eos_id] for t in texts]
    ids[3] = ids[3][:-1]                                                  # cut at the budget: no EOS
    T = max(map(len, ids))
    assert len(ids[3]) == T
    responses = torch.tensor([r + [policy.pad_id] * (T - len(r)) for r in ids])
    mask = lm.model.lengths_mask(torch.tensor([len(r) for r in ids]), T)
    monkeypatch.setattr(policy, "rollout", lambda prompts, *a, **kw: rl.Rollout(prompts, responses, mask,
                                                                                torch.zeros(mask.shape), T))
    got = trainer.collect(cfg, policy, prompt, torch.Generator().manual_seed(0), torch.Generator().manual_seed(0),
                          lambda context: 0.0)
    assert cfg.format_weight == 0.5 and got.correct.tolist() == [1.0, 1.0, 0.0, 0.0]
    assert got.rewards.tolist() == [1.5, 1.0, 0.5, 0.0]
    assert got.truncated.tolist() == [False, False, False, True]
    assert {k: v.tolist() for k, v in got.categories.items()} == {
        "finished": [1.0, 1.0, 1.0, 0.0], "formatted": [1.0, 0.0, 1.0, 0.0], "exact": [1.0, 1.0, 0.0, 0.0],
        "right_sum": [1.0, 1.0, 0.0, 0.0], "no_sum": [0.0, 0.0, 0.0, 1.0]}
    row = {k: float(v) for k, v in rl.sampling_metrics(got, 4).items() if k.startswith("replies/")}
    assert row == {"replies/finished": 0.75, "replies/formatted": 0.5, "replies/exact": 0.5,
                   "replies/right_sum": 0.5, "replies/no_sum": 0.25}


def test_the_learners_forward_runs_in_the_configs_precision(policy, batch):
    """The gpu size's precision="bf16" reaches the real model's learner forward: its log-probs move off the float32
    ones by bfloat16's rounding (about 1e-2 nats), not by nothing and not by a different model."""
    fp32, _ = rl.learner_logp(policy, batch.prompts, batch.responses, 1.0, "fp32")
    bf16, _ = rl.learner_logp(policy, batch.prompts, batch.responses, 1.0, "bf16")
    gap = float((bf16 - fp32).abs()[batch.mask].max())
    assert make_config("real_gpu").precision == "bf16" and bf16.dtype == torch.float32
    assert 1e-4 < gap < 1.0, gap


def test_a_short_run_trains_and_its_reference_is_the_starting_model():
    """Two steps of the whole loop (sampling, micro-batched learning, evaluation on the held-out questions):
    pi_ref reloaded from the folder equals the starting weights, so the KL to it is 0 before the first
    update and positive after it."""
    cfg = make_config("real", **{**SMALL, "eval_every": 1, "seed": SIGNAL_SEED})
    hist = trainer.train(cfg, progress=False)
    r1, r2 = hist.rows[1], hist.rows[2]
    assert r1["groups/zero_signal_frac"] < 1, "no group with signal in step 1: choose another SIGNAL_SEED"
    assert r1["kl/ref"] == 0.0 and r2["kl/ref"] > 0 and r1["grad/norm"] > 0
    assert 0 <= hist.rows[0]["acc/heldout"] <= 1 and r1["samples/step"] == 4
    assert [r["step"] for r in hist.rows] == [0, 1, 2] and all("acc/heldout" in r for r in hist.rows)   # steps, eval_every
    assert [r["lr"] for r in hist.rows[1:]] == pytest.approx([cfg.lr / 3, 2 * cfg.lr / 3])   # warm-up over 3 steps
    assert all(r["replies/finished"] == pytest.approx(1 - r["len/truncated_frac"]) for r in hist.rows[1:])


def test_the_gpu_size_runs_a_step_on_the_cpu():
    cfg = make_config("real_gpu", steps=1, prompts_per_step=2, group_size=2, max_new_tokens=6, minibatches=2,
                      micro_batches=1, eval_every=1, device="cpu", heldout_pairs=1)
    hist = trainer.train(cfg, progress=False)
    assert cfg.precision == "bf16" and hist.rows[1]["samples/step"] == 4
    assert hist.rows[1]["lr"] == pytest.approx(2 * cfg.lr / cfg.warmup_steps)     # two minibatches: two optimiser steps


class Fed(Exception):
    """Raised by a hook on the model's body once it has seen what it is fed."""


def test_moving_the_policy_moves_what_it_feeds_and_the_seed_is_drawn_on_the_generators_device(task):
    """On the ``meta`` device (shapes without numbers: any device would do, none is needed): the learner's
    forward, decoding and scoring feed the model's body on the device its weights were moved to, and pi_ref
    loads there; a rollout's seed is drawn where its generator is, whatever the default device (on a GPU run, the
    trainer's sampling generator is a CUDA one)."""
    moved = build_policy().to("meta")
    assert moved.chat.device == torch.device("meta") and moved.chat.head.device == torch.device("meta")
    seen = []

    def record(module, args, kwargs):
        seen.append({k: v.device for k, v in kwargs.items() if isinstance(v, torch.Tensor)})
        raise Fed

    moved.net.model.register_forward_pre_hook(record, with_kwargs=True)
    prompts = task.prompts("train")[:2]                                   # [2, Lp] on the CPU, as the trainer's
    calls = {"learner's forward": lambda: moved(prompts, continuation=torch.zeros(2, 3, dtype=torch.long)),
             "greedy rollout": lambda: moved.rollout(prompts, 4, greedy=True),
             "score": lambda: moved.chat.score(lm.prompt_rows(prompts), torch.zeros(2, 3, dtype=torch.long),
                                               torch.tensor([3, 2]))}
    for name, call in calls.items():
        with pytest.raises(Fed):
            call()
        assert seen[-1] and set(seen[-1].values()) == {torch.device("meta")}, f"{name} fed {seen[-1]}"
    assert moved.reference().device == torch.device("meta")                 # pi_ref loads where the policy is
    with torch.device("meta"), pytest.raises(Fed):             # drawn on the CPU generator's device, not meta
        moved.rollout(prompts, 4, generator=torch.Generator().manual_seed(0), greedy=True)


def test_the_real_policy_and_its_reference_load_on_the_runs_device(monkeypatch):
    """The policy RL starts from and the pi_ref it reloads are loaded for the run's device (the loads are
    redirected to the CPU, which is all this machine may have; the device each asked for is recorded)."""
    asked, load = [], lm.load
    monkeypatch.setattr("course_lib.lm.model.load",                # where build_policy looks it up
                        lambda dtype, device="cpu", **kw: asked.append(device) or load(dtype, "cpu", **kw))
    policy, _, _ = trainer.initial_policy(make_config("real", device="cpu"), torch.device("cuda:1"))
    assert asked == [torch.device("cuda:1")]
    policy.to("meta")                                       # wherever the policy is moved, pi_ref follows
    policy.reference()(torch.ones(1, 2, dtype=torch.long), continuation=torch.ones(1, 1, dtype=torch.long))
    assert asked[1:] == [torch.device("meta")]


def test_a_reply_cut_at_the_budget_is_marked_truncated_and_one_that_ends_is_not(policy, task):
    """``ChatLM.sample``'s ``truncated`` (what the held-out "replies cut at the budget" share reads) is exactly
    "no EOS within the budget", also on the last step; and ``collect`` reads the same from the policy's ids."""
    prompts = task.prompts("train")[:8].repeat_interleave(2, dim=0)
    seen = set()
    for budget in (3, 48):                     # every reply is cut at 3 tokens; about half end within 48
        roll = policy.chat.sample(lm.prompt_rows(prompts), max_new_tokens=budget, seed=budget, share_prompts=True)
        ended = [policy.eos_id in r[:n] for r, n in zip(roll.response.tolist(), roll.lengths.tolist())]
        assert roll.truncated.tolist() == [not e for e in ended], (budget, roll.lengths.tolist())
        assert all(n == budget for n, e in zip(roll.lengths.tolist(), ended) if not e)
        seen |= set(ended)
    assert seen == {True, False}, "both a reply that ends and one that is cut"
    cfg = replace(make_config("real", device="cpu"), prompts_per_step=2, group_size=2, max_new_tokens=6,
                  micro_batches=1)
    got = trainer.collect(cfg, policy, task.prompts("train"), torch.Generator().manual_seed(0),
                          torch.Generator().manual_seed(1), lambda ctx: 0.0)
    b = got.batch
    assert (b.eos_id, b.pad_id) == (policy.eos_id, policy.pad_id) == (2, 2)      # the model's ids, not the toy's
    no_eos = [policy.eos_id not in r[:int(n)] for r, n in zip(b.responses.tolist(), b.mask.sum(1))]
    assert got.truncated.tolist() == no_eos and got.lengths.tolist() == b.mask.sum(1).tolist()


def test_the_real_models_flops_per_token_count_every_matrix_product_with_the_tied_head(policy):
    """2 N + 2 d_model V + 4 n_layer d_model context a token forward, three times that with the backward (N: the
    parameters outside the embedding, counted here from the model's config, not from its modules)."""
    c = policy.net.config
    D, I, L, V = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    kv = c.num_key_value_heads * (D // c.num_attention_heads)
    n = L * (2 * D * D + 2 * D * kv + 3 * D * I + 2 * D) + D                  # attention, MLP, 2 norms; final norm
    assert n == 106_203_456
    for ctx in (1, 100):
        fwd = 2 * n + 2 * D * V + 4 * L * D * ctx
        assert policy.flops_per_token(ctx, backward=False) == fwd and policy.flops_per_token(ctx) == 3 * fwd


def test_a_greedy_rollout_takes_the_most_probable_token_whatever_the_generator(policy, task):
    """Each token of a greedy reply is (within float rounding between the cached and the full forward) the
    largest logit of the learner's forward at its position, and two generators give the same replies."""
    prompts = task.prompts("heldout")[:3]
    a, b = (policy.rollout(prompts, 10, greedy=True, generator=torch.Generator().manual_seed(s)) for s in (1, 2))
    assert torch.equal(a.responses, b.responses)
    with torch.no_grad():
        logits = policy(prompts, continuation=a.responses[:, :-1])                          # [B, T, V]
    chosen = logits.gather(2, a.responses[..., None])[..., 0]                              # [B, T]
    gap = (logits.max(dim=2).values - chosen)[a.mask]
    assert float(gap.max()) < 1e-3, f"a greedy token {float(gap.max()):.3g} below the best logit"


def test_a_budget_beyond_the_context_is_an_error(policy, task):
    with pytest.raises(ValueError, match="longer than the model's context of 8192"):
        policy.rollout(task.prompts("train")[:1], 8192)


def test_chat_policy_forward_refuses_the_toy_call_forms(policy, batch):
    with pytest.raises(ValueError, match="continuation"):
        policy(batch.prompts)
    assert isinstance(policy, ChatPolicy) and policy.reference().policy is None       # loads only when called
    cfg = replace(make_config("real", **SMALL))
    assert rl.reuses_loss_forward(cfg)


@pytest.mark.parametrize("lora", [[], ["--lora-rank", "1"]], ids=["full", "lora"])
def test_the_step_benchmark_splits_each_step_into_parts_that_add_up(tmp_path, lora):
    """benchmarks/real_lm_step.py, at its smallest, in its own process (it wraps the policy's forward and hooks
    every optimiser): each step's parts add up to the step's wall time, and the loss forward, the backward and
    the optimiser each took time; with LoRA too."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    out = tmp_path / "step.json"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, str(root / "benchmarks" / "real_lm_step.py"), "--steps", "2", "--prompts", "1",
                    "--samples", "2", "--tokens", "4", "--out", str(out), *lora], check=True, capture_output=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
    rec = json.loads(out.read_text())
    assert sorted(rec["steps"]) == ["1", "2"] and rec["sizes"]["micro_batches"] == 2
    assert rec["lora_rank"] == (1 if lora else None)
    for parts in rec["steps"].values():
        assert parts["loss forward"] > 0 and parts["backward"] > 0 and parts["optimizer"] > 0
        assert parts["sample"] > 0 and abs(parts["other"]) < 0.5 * sum(parts.values())
    assert rec["median_step_s"] == pytest.approx(sum(rec["steps"]["2"].values()))
    assert 0.3 < rec["peak_rss_gb"] < 24
