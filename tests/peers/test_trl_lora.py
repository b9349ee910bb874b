"""LoRA in TRL's own GRPOTrainer (``peft_config``) and in the course's trainer (``lm.lora``), on the real model and
test_trl_real's prepared batch: TRL's first step's adapter gradients are the course's.

TRL is handed the pretrained model and ``peft.LoraConfig(**frameworks.peft_lora_kwargs(cfg))``, the settings
``frameworks.to_trl`` prints for a LoRA run, and puts the adapters in itself; the course's LoRA policy is built on a
second copy of the pretrained model and given TRL's initial adapters (peft draws A at random; B starts at 0), so
that both start from the same weights. At B = 0 the gradient of every A is 0 on both sides and the first step's
gradient is the B's: rank x (out features) entries per layer, compared with test_trl_real's tolerances. A planted
bug on the course side (the advantage's sign) must break the agreement.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from conftest import REASON

pytest.importorskip("trl", reason=REASON)
pytest.importorskip("peft", reason=REASON)
from test_trl_real import CFG, batch, chat, course_first_step, failures, gaps, trl_first_step   # noqa: E402,F401

from course_lib import frameworks, lm                               # noqa: E402
from course_lib.lm.lora import LoraChatPolicy                       # noqa: E402

LORA_CFG = replace(CFG, policy="smollm2_lora", lora_rank=2)          # test_trl_real's config, with adapters


@pytest.fixture(scope="module")
def trl_lora_step(chat, batch, tmp_path_factory):
    from peft import LoraConfig
    return trl_first_step(chat, batch, str(tmp_path_factory.mktemp("trl_lora")),
                          peft_config=LoraConfig(**frameworks.peft_lora_kwargs(LORA_CFG)))


def course_lora_step(chat, batch, bug=None) -> dict:
    """The course's LoRA policy on a fresh copy of the model, its adapters set to TRL's initial ones (``chat``
    holds them after TRL's step: its weights are restored to where the step began)."""
    fresh = lm.load("fp32")
    policy = LoraChatPolicy(fresh, LORA_CFG.lora_rank, LORA_CFG.lora_alpha, tuple(LORA_CFG.lora_targets))
    trl_adapters = {n: p for n, p in chat.model.named_parameters() if ".lora_" in n}
    with torch.no_grad():
        for n, p in fresh.model.named_parameters():
            if ".lora_" in n:
                p.copy_(trl_adapters[n])
    assert len(trl_adapters) == len(policy.trainable_parameters())
    return course_first_step(fresh, batch, bug, policy=policy)


def test_trl_and_the_course_train_the_same_adapters_and_nothing_else(trl_lora_step, chat):
    got = trl_lora_step["grad"]
    assert got and all(".lora_" in n for n in got)                       # no base weight has a gradient
    assert all(float(g.abs().max()) == 0 for n, g in got.items() if ".lora_A." in n)   # B = 0: A's gradient is 0
    n_b = sum(g.numel() for n, g in got.items() if ".lora_B." in n)
    assert n_b == 30 * LORA_CFG.lora_rank * (576 + 192 + 192 + 576 + 1536 + 1536 + 576)


def test_trls_first_lora_step_is_the_course_trainers(trl_lora_step, chat, batch):
    course = course_lora_step(chat, batch)
    assert set(course["grad"]) == set(trl_lora_step["grad"])
    g = gaps(course, trl_lora_step)
    print(f"LoRA rank {LORA_CFG.lora_rank}, first step, course against TRL: {g}")
    assert not failures(g), g


def test_a_planted_bug_breaks_the_lora_agreement(trl_lora_step, chat, batch):
    assert failures(gaps(course_lora_step(chat, batch, "advantage sign"), trl_lora_step))
