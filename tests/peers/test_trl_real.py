"""The real model in TRL's own GRPOTrainer (benchmarks/trl_real.py): on one prepared batch, TRL's first step is
the course trainer's.

The model: SmolLM2-135M-Instruct from `make model`'s folder, one object (``lm.load("fp32")``) that both trainers
train, in float32. The batch: 2 training questions x G = 4 replies of up to 48 tokens, sampled once by
``ChatPolicy.rollout`` with a fixed generator, two of them replaced by written replies that state
"Answer: <n>" (one right, one wrong), so that the format term of the reward (exact + 0.5 x format) is not 0
everywhere and every group has rewards that differ; some replies end with EOS, some reach the budget.

TRL's side is TRL's code from the dataset on: ``GRPOTrainer.train()`` for one step with
``GRPOConfig(**frameworks.to_trl(cfg))`` plus the machine's settings, the questions as conversations (TRL applies
the chat template), the rewards as two functions, course_lib.lm.task's ``exact`` and ``formatted`` verdicts,
weighted by to_trl's ``reward_weights``; only the model's ``generate`` is replaced: it returns the prepared
replies, padded after their end with the pad token as ``generate`` pads them. TRL tokenises, cuts each reply after
its first EOS, scores, computes the group advantages, splits the batch into its micro-batches (one group each,
as the real config's 8 of 8 groups: here 2), accumulates their gradients, clips and logs the gradient norm. The
course's side is ``trainer.learn`` on the same batch (the trainer's path at this config: a micro-batch per group,
pi_old from each one's own loss forward, no reference), with an optimiser that records the gradient it would
apply.

The conventions that differ, aligned here:
- the advantage's std: TRL divides by std + 1e-4, course_lib by std + 1e-6: the course side runs with 1e-4;
- the aggregation: TRL's default loss_type is "dapo" (token mean over the batch); to_trl sets "grpo", the
  real config's sequence mean of token means;
- pad == EOS for this model (<|im_end|>, id 2): TRL cuts a generated reply after its first EOS and builds the
  loss mask from the lengths, as the course does; a mask built as ``ids != pad`` would drop every real EOS
  (a planted case below);
- activation (gradient) checkpointing, on by default in GRPOConfig: off, as in the course's trainer.
A planted bug on the course side (the advantage's sign, another aggregation, the EOS out of the mask) must
break the agreement.
"""
from __future__ import annotations

import gc
import importlib.util
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from conftest import REASON, write_record

pytest.importorskip("trl", reason=REASON)
from course_lib import advantages, frameworks, lm, rl                # noqa: E402
from course_lib.lm.policy import ChatPolicy                          # noqa: E402
from course_lib.lm.task import ChatAdditionTask, ChatTask, Questions  # noqa: E402
from course_lib.rl import loss_step, trainer                        # noqa: E402
from course_lib.rl.config import make_config                      # noqa: E402
from course_lib.rl.history import config_record                    # noqa: E402
from course_lib.rl.rollout import shaped_rewards                    # noqa: E402

spec = importlib.util.spec_from_file_location("trl_real",
                                              Path(__file__).resolve().parents[2] / "benchmarks" / "trl_real.py")
trl_real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trl_real)

P, G, T = 2, 4, 48
QUESTIONS = [1, 53]                  # of the training split: "Compute 0 + 0." and "2 + 4 = ?"
SAMPLING_SEED = 3
WRITTEN = {3: "0 + 0 = 0. Answer: 0", 7: "2 + 4 = 5. Answer: 5"}     # row -> reply: rewards 1.5 and 0.5
TRL_EPS = 1e-4                       # TRL's advantage: (r - mean) / (std + 1e-4)
CFG = trl_real.bench_config(steps=1, prompts=P, samples=G, tokens=T, threads=1)     # the real config, 2 x 4
# Tolerances. The two sides compute the same float32 function through different layouts: the course feeds each
# group's prompt once into a KV cache and scores the replies after it, with positions counting real tokens, in
# each micro-batch; TRL runs prompt + reply, left-padded, in one forward per micro-batch (positions shifted by the
# padding: the same attention in exact arithmetic, RoPE being relative), its fused LM head taking the
# log-probs. Measured: the applied gradient 1.2e-5 of its largest entry apart (2.2e-5 in L2), the norm 3e-7
# (relative); under ATEN_CPU_CAPABILITY=default 2.6e-5 (4.4e-5) and 4.4e-6. The tolerances leave about 10x
# that for other CPUs' float paths; every planted bug moves the gradient by more than 0.5 of its largest entry.
ADV_TOL = 1e-6               # advantages, absolute (float32 from the same rewards; measured 6e-8)
LOSS_TOL = 1e-6              # the loss, absolute; it is -mean(A) = 0 at ratio 1 on both sides, so it checks little
NORM_TOL = 5e-5              # the gradient norm before clipping, relative
GRAD_TOL = 3e-4              # the applied (clipped) gradient: largest entry difference, and L2 norm of the
                             # difference, over TRL's largest entry and norm


@pytest.fixture(scope="module")
def chat():
    """The model, from `make model`'s folder in the course's venv (the peers venv has none; $COURSE_LM_DIR
    overrides), for the module's tests; a skip naming `make model` when it is not built."""
    with pytest.MonkeyPatch.context() as mp:
        if lm.CACHE_VARIABLE not in os.environ:
            mp.setenv(lm.CACHE_VARIABLE, str(trl_real.COURSE_MODEL))
        if not lm.is_built():
            pytest.skip(f"needs the real model in {lm.cache_dir()}: `make model` builds it (or set "
                        f"${lm.CACHE_VARIABLE} to a built folder)")
        yield lm.load("fp32")


@pytest.fixture(scope="module")
def batch(chat):
    """The prepared batch as the course's trainer holds it: prompts [8, Lp] (left-padded with lm.PROMPT_PAD),
    replies [8, T] (the pad id after each end), the mask from the lengths, the shaped rewards."""
    task = ChatTask(CFG.heldout_pairs)
    task.tokenizer = chat.tokenizer                              # the model's own, not a second load
    policy = ChatPolicy(chat)
    prompts = task.prompts("train")[QUESTIONS].repeat_interleave(G, dim=0)                   # [B, Lp]
    roll = policy.rollout(prompts, T, generator=torch.Generator().manual_seed(SAMPLING_SEED))
    responses, mask, rollout_logp = roll.responses.clone(), roll.mask.clone(), roll.rollout_logp.clone()
    for row, text in WRITTEN.items():                  # not sampled: pi_old comes from the learner's forward anyway
        ids = chat.tokenizer.encode(text) + [policy.eos_id]
        responses[row] = policy.pad_id
        responses[row, :len(ids)] = torch.tensor(ids)
        mask[row] = torch.arange(responses.shape[1]) < len(ids)
        rollout_logp[row] = 0.0
    exact = task.verifiers["exact"](prompts, responses)
    formatted = task.verifiers["format"](prompts, responses)
    rewards = shaped_rewards(CFG, exact, mask.sum(1), formatted)                              # [B]
    lengths = mask.sum(1)
    ended = ((responses == policy.eos_id) & mask).any(1)
    assert (rewards.view(P, G).std(1) > 0).all(), f"a group without signal: {rewards.tolist()}"
    assert rewards[list(WRITTEN)].tolist() == [1.5, 0.5]
    assert ended.any() and (~ended).any() and len(set(lengths[ended].tolist())) > 1, \
        f"wanted replies that end at several places and one that reaches the budget: {lengths.tolist()}"
    return rl.Batch(prompts, responses, mask, rollout_logp, rewards, eos_id=policy.eos_id, pad_id=policy.pad_id)


def course_first_step(chat, batch, bug=None, policy=None) -> dict:
    """The course trainer's learn() on the batch, with TRL's advantage epsilon: the loss, the gradient norm
    before clipping, the gradient the optimiser step would apply {name: tensor, for every parameter that has
    one}. ``bug``: a planted one. ``policy``: another policy on ``chat`` (its LoRA one), else the full model."""
    cfg = replace(CFG, agg="token-mean") if bug == "aggregation" else CFG
    if bug == "EOS out of the mask":                   # pad == EOS: ids != pad drops each real EOS
        batch = replace(batch, mask=batch.responses != batch.pad_id)
    sign = -1.0 if bug == "advantage sign" else 1.0
    policy = ChatPolicy(chat).requires_grad_(True) if policy is None else policy
    got = {}

    class Keep(torch.optim.SGD):
        """Records the gradient at the optimiser step (after the trainer's clipping) and steps nothing."""
        def step(self, closure=None):
            got["grad"] = {n: p.grad.clone() for n, p in chat.model.named_parameters() if p.grad is not None}

    def grpo_trl_eps(r, group_size, scale, mask):                # loss_step's "grpo" estimator, TRL's epsilon
        return sign * advantages.group_advantages(r, group_size, scale=scale, eps=TRL_EPS)

    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(loss_step.ADV_ESTIMATORS, "grpo", grpo_trl_eps)
        metrics = trainer.learn(cfg, rl.loss_setup(cfg), policy, None, Keep(policy.trainable_parameters(), lr=0.0),
                                batch,
                                torch.Generator().manual_seed(0), lambda: 0.0, with_ref=False)
    chat.model.zero_grad(set_to_none=True)
    return {"loss": float(metrics["loss/policy"]), "grad_norm": float(metrics["grad/norm"]), **got}


def trl_first_step(chat, batch, output_dir: str, peft_config=None) -> dict:
    """One step of TRL's GRPOTrainer on the batch: the loss, the gradient norm it logs, the gradient it applies
    {name: tensor, for every parameter that has one}, and per row (in TRL's order) the prompt and reply ids under
    its masks, rewards, advantages. The model's weights are restored after the step; with ``peft_config`` TRL
    puts its adapters into the model (for good: ``chat`` then is the adapted model, its adapters as trained)."""
    from transformers import TrainerCallback
    prompts = lm.prompt_rows(batch.prompts)
    replies: dict[tuple, list] = {}
    for p, r, n in zip(prompts, batch.responses.tolist(), batch.mask.sum(1).tolist()):
        replies.setdefault(tuple(p), []).append(r[:n])
    questions = ChatAdditionTask(CFG.heldout_pairs).questions("train")
    data = trl_real.dataset(Questions([questions.texts[i] for i in QUESTIONS],
                                      [questions.answers[i] for i in QUESTIONS], 1))
    eos = chat.eos_id

    def generate(input_ids, attention_mask, **_):
        """The prepared replies of each prompt row, padded as generate pads a finished row (pad = EOS)."""
        rows = []
        for ids, keep in zip(input_ids.tolist(), attention_mask.tolist()):
            prompt = tuple(t for t, k in zip(ids, keep) if k)
            assert prompt in replies, f"TRL's chat prompt is none of the course's: {chat.tokenizer.decode(prompt)!r}"
            rows.append(replies[prompt].pop(0))
        C = max(map(len, rows))
        return torch.cat([input_ids, torch.tensor([r + [eos] * (C - len(r)) for r in rows])], dim=1)

    got = {"loss": 0.0}

    class Record(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kw):          # after clipping
            got["grad"] = {n: p.grad.clone() for n, p in chat.model.named_parameters() if p.grad is not None}

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "grad_norm" in logs:
                got["grad_norm"] = float(logs["grad_norm"])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chat.model, "generate", generate)
        trl = trl_real.trl_trainer(CFG, chat.model, chat.tokenizer, data, 1, output_dir, callbacks=[Record()],
                                   peft_config=peft_config)
        got["start"] = {n: p.detach().clone() for n, p in chat.model.named_parameters()}     # TRL's adapters too
        score, rewards, loss = trl._generate_and_score_completions, trl._calculate_rewards, trl.compute_loss

        def scored(inputs):
            got["inputs"] = out = score(inputs)
            return out

        def rewarded(*a, **k):
            got["rewards_per_func"] = out = rewards(*a, **k)
            return out

        def loss_of(*a, **k):
            out = loss(*a, **k)                        # each micro-batch's loss over the accumulation steps
            got["loss"] += float(out.detach())
            return out
        trl._generate_and_score_completions, trl._calculate_rewards, trl.compute_loss = scored, rewarded, loss_of
        trl.train()
        got["reward_weights"] = trl.reward_weights.tolist()
    del trl
    gc.collect()
    with torch.no_grad():
        for n, p in chat.model.named_parameters():
            p.copy_(got["start"][n])
    del got["start"]
    chat.model.zero_grad(set_to_none=True)
    return got


@pytest.fixture(scope="module")
def trl_step(chat, batch, tmp_path_factory):
    return trl_first_step(chat, batch, str(tmp_path_factory.mktemp("trl_real")))


@pytest.fixture(scope="module")
def course_step(chat, batch):
    return course_first_step(chat, batch)


def rows_in_course_order(trl_step, batch) -> torch.Tensor:
    """For each course row, the TRL row with the same prompt and the same reply under TRL's masks [B]."""
    inp = trl_step["inputs"]
    key = lambda ids, m: tuple(ids[m.bool()].tolist())                                  # noqa: E731
    trl_rows = {(key(p, pm), key(c, cm)): i for i, (p, pm, c, cm) in enumerate(
        zip(inp["prompt_ids"], inp["prompt_mask"], inp["completion_ids"], inp["completion_mask"]))}
    out = []
    for p, r, m in zip(lm.prompt_rows(batch.prompts), batch.responses, batch.mask):
        k = (tuple(p), tuple(r[m].tolist()))
        assert k in trl_rows, "a course row that TRL did not score, its prompt and reply (to the first EOS) as is"
        out.append(trl_rows[k])
    return torch.tensor(out)


def gaps(course: dict, trl: dict) -> dict:
    """How far the course's first step is from TRL's: loss (absolute), gradient norm (relative), applied
    gradient (largest entry difference over the largest entry, and the L2 norm of the difference over TRL's)."""
    scale = max(float(g.abs().max()) for g in trl["grad"].values())
    diff = max(float((course["grad"][n] - g).abs().max()) for n, g in trl["grad"].items())
    l2 = sum(float((course["grad"][n] - g).pow(2).sum()) for n, g in trl["grad"].items()) ** 0.5
    norm = sum(float(g.pow(2).sum()) for g in trl["grad"].values()) ** 0.5
    return {"loss": abs(course["loss"] - trl["loss"]),
            "grad_norm": abs(course["grad_norm"] - trl["grad_norm"]) / trl["grad_norm"],
            "grad": diff / scale, "grad_l2": l2 / norm, "largest_entry": scale}


def failures(g: dict) -> list[str]:
    """The checks the gaps fail, by name."""
    return [f"{k} {g[k]:.2e} > {tol:.0e}" for k, tol in (("loss", LOSS_TOL), ("grad_norm", NORM_TOL),
                                                         ("grad", GRAD_TOL), ("grad_l2", GRAD_TOL)) if g[k] > tol]


def test_trl_scores_the_course_rows_with_the_course_rewards_and_advantages(trl_step, batch):
    """TRL's chat prompt is lm.chat_ids's; it cuts each reply after its first EOS (the EOS in, the padding
    out) as the course's length mask does; its reward is exact + 0.5 x format; its advantages are the course's
    with the std's epsilon 1e-4 (with course_lib's 1e-6 they differ by more than the tolerance)."""
    order = rows_in_course_order(trl_step, batch)
    assert sorted(order.tolist()) == list(range(P * G))
    assert torch.equal(trl_step["inputs"]["completion_mask"].sum(1)[order], batch.mask.sum(1))
    assert trl_step["reward_weights"] == [1.0, CFG.format_weight]
    trl_rewards = trl_step["rewards_per_func"] @ torch.tensor(trl_step["reward_weights"])       # [B]
    assert torch.equal(trl_rewards[order], batch.rewards)
    trl_adv = trl_step["inputs"]["advantages"][order]
    ours = advantages.group_advantages(batch.rewards, G, eps=TRL_EPS)
    own_eps = advantages.group_advantages(batch.rewards, G)                                # course_lib's 1e-6
    assert float((ours - trl_adv).abs().max()) < ADV_TOL
    assert float((own_eps - trl_adv).abs().max()) > 10 * ADV_TOL


def test_trls_first_step_is_the_course_trainers(trl_step, course_step):
    """The loss (to 1e-6), the gradient norm before clipping (5e-5 relative) and the gradient each applies (3e-4
    of the largest entry, and in L2) agree: float32 through two layouts (see the tolerances above)."""
    g = gaps(course_step, trl_step)
    assert g["largest_entry"] > 1e-3                              # a real gradient, not two zeros
    assert not failures(g), (failures(g), g)
    assert abs(course_step["loss"]) < LOSS_TOL                    # -mean(A) at ratio 1


@pytest.mark.parametrize("bug", ["advantage sign", "aggregation", "EOS out of the mask"])
def test_a_planted_bug_breaks_the_agreement(bug, chat, batch, trl_step):
    g = gaps(course_first_step(chat, batch, bug=bug), trl_step)
    assert any(f.startswith("grad ") for f in failures(g)) and g["grad"] > 100 * GRAD_TOL, (bug, g)


def test_the_defaults_that_differ_are_set():
    """GRPOConfig's defaults that differ from the course's trainer, and the settings (to_trl's, the machine's)
    that align them: the aggregation, activation checkpointing, one micro-batch per group."""
    from trl import GRPOConfig
    default = GRPOConfig(output_dir="unused", use_cpu=True, bf16=False, report_to="none")
    ours = GRPOConfig(**trl_real.trl_settings(CFG, 1, 0, "unused"))
    assert (default.loss_type, ours.loss_type) == ("dapo", "grpo")          # token mean vs the sequence mean
    assert (default.gradient_checkpointing, ours.gradient_checkpointing) == (True, False)
    assert ours.beta == 0.0 and ours.scale_rewards == "group" and not ours.use_vllm
    kw = dict((k, v) for k, v, _ in frameworks.to_trl(CFG) if not k.startswith("#"))
    assert (kw["per_device_train_batch_size"], kw["gradient_accumulation_steps"]) == (G * P // CFG.micro_batches,
                                                                                     CFG.micro_batches)


CURVE_STEPS = 30                     # chapter 13's runs


def test_trls_own_learning_curve_on_chapter_13s_run_is_stored(chat):
    """TRL's GRPOTrainer trains chapter 13's config for its 30 steps (about 15-25 minutes on 2 cores): `make peers`
    stores the curve in notebooks/data/trl_real_curve.json once, and keeps a stored curve of today's config. Checked:
    a row per step, the reward is exact + 0.5 x format as TRL logs its two reward functions, and the run learns."""
    folder = os.environ.get("PEERS_RECORD_DIR")
    path = Path(folder or ".") / "trl_real_curve.json"
    want = config_record(make_config("real", steps=CURVE_STEPS, seed=0, device="cpu", num_threads=2))
    stored = json.loads(path.read_text()) if folder and path.exists() else None
    if stored is None or stored["config"] != want:
        if not folder:
            pytest.skip("TRL's 30-step curve runs only under `make peers` (PEERS_RECORD_DIR), which stores it")
        stored = trl_real.trl_curve(CURVE_STEPS)
        write_record(path.name, stored)
    rows = stored["rows"]
    assert [r["step"] for r in rows] == list(range(1, CURVE_STEPS + 1))
    for r in rows:
        assert r["reward"] == pytest.approx(r["rewards/exact_reward/mean"] + 0.5 * r["rewards/format_reward/mean"],
                                            abs=1e-5)
    early = sum(r["reward"] for r in rows[:10]) / 10
    late = sum(r["reward"] for r in rows[-10:]) / 10
    assert late > early, (early, late)


def test_the_timing_runs_the_two_trainers_a_step_each_in_turn(chat):
    """benchmarks/trl_real.py's timing, at a tiny size: a course step, then a TRL step, and so on (each hands
    over after its step: the course after each of its steps, TRL at the start of its next one), each step timed
    on its own work."""
    cfg = trl_real.bench_config(steps=3, prompts=2, samples=2, tokens=4, threads=1)
    runs, load = trl_real.interleaved(cfg)
    assert [who for who, _ in load] == ["course", "TRL", "course", "TRL", "course"]
    for run in runs.values():
        assert len(run["step_s"]) == 3 and all(t > 0 for t in run["step_s"])
        assert run["threads"] == 1
    assert len(trl_real.pair_ratios(runs)) == 1         # step 2: timed by both


def test_a_lora_timing_hands_trl_the_same_adapters_as_the_course():
    """``--lora-rank``: both trainers train LoRA adapters of that rank (TRL through ``peft_config``), so TRL trains
    exactly the course policy's adapter parameters, not the whole model."""
    cfg = trl_real.bench_config(steps=1, prompts=2, samples=2, tokens=4, threads=1, lora_rank=2)
    assert trl_real.peft_config(trl_real.bench_config(1, 2, 2, 4, 1)) is None
    assert trl_real.peft_config(cfg).r == 2
    runs, _ = trl_real.interleaved(cfg)
    assert runs["TRL"]["trainable"] == 2 * 305_280        # rank x (in + out) over 30 layers x 7 linears, as ours
