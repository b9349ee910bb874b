"""The trainer's task plug-in: a task named in RunConfig supplies prompts, verifier, warm start and
vocabulary, and the same train() runs it (the addition task and the scratchpad task are two)."""
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from course_lib.toy import task as T
from course_lib.rl import registry
from course_lib.rl.config import RunConfig
from course_lib.rl import build_model, train

TINY = dict(steps=3, prompts_per_step=8, group_size=4, n_layer=1, d_model=16, n_head=2, warm_steps=20,
            warm_target=None, warm_batch=32, heldout_questions=16, eval_every=3, device="cpu", num_threads=1)
MARK = 14                                                   # the copy task's own token


def copy_exact(prompts, responses):
    """1 when the response is the prompt's three digits, then EOS."""
    want = torch.cat([prompts[:, 1:], torch.full((len(prompts), 1), T.EOS)], dim=1)       # [B, 4]
    return (responses[:, :4] == want).all(dim=1).float()


def never(prompts, responses):
    return torch.zeros(len(prompts))


@dataclass(frozen=True)
class CopyTask:
    """Prompts "#xyz" (# = id 14); the answer repeats xyz."""
    heldout_questions: int = 16
    name: ClassVar[str] = "copy"
    policy: ClassVar[str] = "tiny_gpt"
    config_fields: ClassVar[tuple] = ("heldout_questions",)
    prompt_len: ClassVar[int] = 4
    vocab_size: ClassVar[int] = 15
    verifiers: ClassVar[dict] = {"exact": copy_exact, "never": never}

    def prompts(self, split="train"):
        ids = torch.arange(1000)
        p = torch.stack([torch.full_like(ids, MARK), ids // 100, ids // 10 % 10, ids % 10], dim=1)
        return p[self.heldout_questions:] if split == "train" else p[: self.heldout_questions]

    def warm_answers(self, prompts, noise, generator, max_len):
        ans = torch.cat([prompts[:, 1:], torch.full((len(prompts), 1), T.EOS)], dim=1)
        return torch.cat([ans, torch.full((len(prompts), max_len - 4), T.PAD)], dim=1)[:, :max_len]

    def to_text(self, tokens):
        return "".join("#" if t == MARK else T.to_text([t]) for t in tokens)


@pytest.fixture
def copy_task():
    registry.register_task("copy", lambda cfg: CopyTask(heldout_questions=cfg.heldout_questions))
    yield
    registry.TASKS.pop("copy")


def test_a_registered_task_trains_through_the_same_trainer(copy_task, monkeypatch):
    cfg = RunConfig(task="copy", max_new_tokens=5, **{**TINY, "warm_steps": 200, "warm_lr": 1e-2})
    model = build_model(cfg)
    assert model.tok.weight.shape[0] == model.head.weight.shape[0] == 15
    assert model.block_size == 4 + 5
    seen = []
    monkeypatch.setitem(CopyTask.verifiers, "exact", lambda p, r: seen.append(p.shape) or copy_exact(p, r))
    h = train(cfg, progress=False)
    assert all(s[1] == 4 for s in seen) and len(seen) >= 3        # the task's verifier, on its prompts
    first, last = h.rows[0]["acc/heldout"], h.rows[-1]["acc/heldout"]
    assert first > 0.5 and last > 0.5                               # the warm start taught the copy
    hacked = train(RunConfig(task="copy", max_new_tokens=5, verifier="never", **TINY), progress=False)
    assert all(r["reward/mean"] == 0.0 for r in hacked.rows[1:])     # the reward is the chosen verifier's


def test_a_config_names_a_known_task_and_one_of_its_verifiers(copy_task):
    with pytest.raises(ValueError, match="task must be one of"):
        RunConfig(task="chess")
    with pytest.raises(ValueError, match="verifier must be one of the 'copy' task's verifiers"):
        RunConfig(task="copy", verifier="contains")
    with pytest.raises(ValueError, match="verifier must be one of the 'scratchpad' task's"):
        RunConfig(task="scratchpad", verifier="contains")
    assert RunConfig(task="scratchpad", verifier="format").verifier == "format"


def test_the_scratchpad_task_trains_with_long_answers():
    cfg = RunConfig(task="scratchpad", max_new_tokens=48, **{**TINY, "warm_steps": 40})
    assert build_model(cfg).tok.weight.shape[0] == 17
    h = train(cfg, progress=False)
    lengths = [r["len/all"] for r in h.rows[1:]]
    assert all(4 < n < 48 for n in lengths)                         # long and of varying length
    assert all(0 <= r["len/truncated_frac"] <= 1 for r in h.rows[1:])


def test_the_addition_only_measurements_refuse_another_task():
    from course_lib.toy import experiments
    cfg = RunConfig(task="scratchpad", max_new_tokens=48, **TINY)
    for fn in (experiments.clip_higher_mechanism, experiments.zero_signal_share):
        with pytest.raises(ValueError, match="task='scratchpad'"):
            fn(cfg)
    with pytest.raises(ValueError, match="error_analysis reads the addition task"):
        experiments.error_analysis(cfg, {})


def test_a_second_reward_term_adds_the_format_verdict_to_the_correctness(monkeypatch):
    """format_weight w: each sampled response's reward is exact + w * format, both read by the task's
    own verifiers on the responses drawn (the terms differ on some responses, so both are seen).
    The sampler returns the task's warm-start traces (half with a slip), cut at the budget."""
    from course_lib.rl import trainer
    from course_lib.rl.policy import Rollout
    from course_lib.toy.scratchpad import ScratchpadTask
    cfg = RunConfig(task="scratchpad", max_new_tokens=40, format_weight=0.5, **TINY)
    task = ScratchpadTask(heldout_questions=cfg.heldout_questions)

    def traces(model, prompts, max_new_tokens, **kw):
        resp = task.warm_answers(prompts, 0.5, torch.Generator().manual_seed(3), max_new_tokens)
        mask = (resp != T.PAD) | (torch.arange(max_new_tokens) == 0)
        return Rollout(prompts, resp, mask, torch.zeros(resp.shape), max_new_tokens)
    from course_lib.toy import policy
    monkeypatch.setattr(policy, "sample", traces)                 # what TinyGPT.rollout calls
    model = build_model(cfg)
    got = trainer.collect(cfg, model, task.prompts("train"), torch.Generator().manual_seed(0),
                          torch.Generator().manual_seed(1), lambda ctx: 0.0)
    b = got.batch
    exact = task.verifiers["exact"](b.prompts, b.responses)
    form = task.verifiers["format"](b.prompts, b.responses)
    torch.testing.assert_close(b.rewards, exact + 0.5 * form)
    torch.testing.assert_close(got.correct, exact)                  # accuracy stays the exact check
    assert form.sum() > exact.sum()                                 # a second term, not the first again


def test_the_new_knobs_refuse_what_they_cannot_do():
    with pytest.raises(ValueError, match="format_weight needs a task with a 'format' verifier"):
        RunConfig(format_weight=0.5)                                # the addition task has none
    for name in ("format_weight", "entropy_coef"):
        with pytest.raises(ValueError, match=f"{name} must be a number >= 0"):
            RunConfig(task="scratchpad", max_new_tokens=48, **{name: -0.1})
    with pytest.raises(ValueError, match="std_scope='batch' applies to adv_estimator='grpo' only"):
        RunConfig(std_scope="batch", adv_estimator="rloo")
    with pytest.raises(ValueError, match="std_scope must be one of"):
        RunConfig(std_scope="token")


@pytest.mark.parametrize("name, n_all, max_new", [("addition", 10_000, 6), ("scratchpad", 10 ** 6, 48)])
def test_the_held_out_size_follows_the_config_and_none_of_them_is_trained_on(name, n_all, max_new, monkeypatch):
    from course_lib.rl import trainer
    from course_lib.toy import scratchpad
    cfg = RunConfig(task=name, max_new_tokens=max_new, **{**TINY, "heldout_questions": 37, "steps": 1, "warm_steps": 0})
    task = registry.make_task(cfg)
    held, rest = task.prompts("heldout"), task.prompts("train")
    decode = T.decode_operands if name == "addition" else scratchpad.decode_operands
    code = lambda p: decode(p)[0] * (n_all // (100 if name == "addition" else 1000)) + decode(p)[1]  # noqa: E731
    assert len(held) == 37 and len(rest) == n_all - 37
    assert len(set(code(held).tolist())) == 37 and not torch.isin(code(rest), code(held)).any()
    seen = []
    real = trainer.heldout_accuracy
    monkeypatch.setattr(trainer, "heldout_accuracy", lambda m, p, *a: seen.append(len(p)) or real(m, p, *a))
    train(cfg, progress=False)
    assert seen == [37, 37]                                  # before RL and after the last step
