"""The toy task: two-digit addition with a verifiable 0/1 reward.

A prompt is "ab+cd=" (two digits each, so every prompt has the same length and no left
padding is needed); the answer is the sum written without leading zeros, then EOS:
"07+35=" -> "42<eos>". Answers have 1 to 3 digits, so responses have variable length.
The reward is 1 exactly when the response, up to its first EOS, is the correct sum and the
EOS comes within the generation budget; anything else (a wrong number, no EOS) earns 0.

Token ids: digits 0-9 are 0-9, then '+', '=', EOS and PAD (padding after EOS, never sampled
inside a response's mask).

The trainer reads a task through ``rl.task.Task`` (``rl.registry.make_task(cfg)`` builds the one a config
names), so another task with its own prompts, verifier and warm-start answers (``warm_answers(prompts, noise,
generator, max_len)``: supervised targets for the toy's warm start, EOS-terminated unless cut, PAD after, a share
``noise`` of them wrong) plugs into the same trainer, policy and sampler; EOS and PAD keep their ids in every toy
task.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from .tokens import EOS, EQUALS, PAD, PLUS, response_mask  # noqa: F401 (every task's ids, re-exported)

VOCAB_SIZE = 14
PROMPT_LEN = 6                      # "ab+cd="
ANSWER_MAX_DIGITS = 3               # 99 + 99 = 198
_SYMBOLS = {PLUS: "+", EQUALS: "=", EOS: "<eos>", PAD: "."}


def encode_prompts(a: Tensor, b: Tensor) -> Tensor:
    """Operands a, b [N] (ints in 0..99) -> prompt tokens [N, 6] = a1 a0 + b1 b0 =."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Tensor) or x.dim() != 1 or x.is_floating_point():
            raise ValueError(f"{name} must be a 1-d integer tensor, got {x!r}")
        if ((x < 0) | (x > 99)).any():
            raise ValueError(f"{name} must lie in 0..99")
    cols = [a // 10, a % 10, torch.full_like(a, PLUS), b // 10, b % 10, torch.full_like(a, EQUALS)]
    return torch.stack(cols, dim=1)                                   # [N, 6]


def decode_operands(prompts: Tensor) -> tuple[Tensor, Tensor]:
    """Prompt tokens [N, 6] -> (a, b) [N]."""
    return prompts[:, 0] * 10 + prompts[:, 1], prompts[:, 3] * 10 + prompts[:, 4]


def answer_tokens(n: int) -> list[int]:
    """The tokens of a correct response for the sum n: its decimal digits then EOS."""
    return [int(c) for c in str(int(n))] + [EOS]


def to_text(tokens) -> str:
    """Token ids -> a readable string (digits, '+', '=', '<eos>', '.' for PAD)."""
    return "".join(_SYMBOLS.get(int(t), str(int(t))) for t in tokens)


def correctness(prompts: Tensor, responses: Tensor) -> Tensor:
    """0/1 reward [B] (float): the response is exactly the sum's digits followed by EOS.

    prompts [B, 6], responses [B, T] (PAD after EOS). Leading zeros ("042") are wrong, as is a
    response with no EOS or any token other than a digit before the EOS.
    """
    a, b = decode_operands(prompts)
    target = a + b                                                    # [B]
    B, T = responses.shape
    mask = response_mask(responses)
    lengths = mask.sum(dim=1)                                         # includes the EOS
    has_eos = (responses == EOS).any(dim=1)
    n_digits = lengths - 1
    digits = responses.clamp(max=9)                                   # non-digits are caught below
    all_digits = ((responses <= 9) | ~mask | (responses == EOS)).all(dim=1)
    value = torch.zeros(B, dtype=torch.long, device=responses.device)
    for t in range(T):                                                # T <= 8: a loop is clearest
        inside = (t < n_digits)
        value = torch.where(inside, value * 10 + digits[:, t], value)
    width = torch.where(target >= 100, 3, torch.where(target >= 10, 2, 1))   # digits of the sum
    ok = has_eos & all_digits & (n_digits == width) & (value == target)
    return ok.float()


def contains_sum(prompts: Tensor, responses: Tensor) -> Tensor:
    """A lenient verifier's 0/1 reward [B]: the sum's digits appear anywhere, contiguously, in the
    response before its first EOS ("7+35=" -> "5242" passes). Deliberately wrong: it is what a
    check like ``str(answer) in response`` gives, and a policy can learn to exploit it.
    """
    a, b = decode_operands(prompts)
    target = a + b                                                    # [B]
    width = torch.where(target >= 100, 3, torch.where(target >= 10, 2, 1))
    digits = torch.stack([target // 100, target // 10 % 10, target % 10], dim=1)   # [B, 3]
    mask = response_mask(responses) & (responses <= 9)                # digit positions before EOS
    B, T = responses.shape
    found = torch.zeros(B, dtype=torch.bool, device=responses.device)
    for w in (1, 2, 3):
        rows = width == w
        want = digits[:, 3 - w:]                                      # [B, w] the sum's digits
        for t in range(T - w + 1):                                    # T <= 8: a loop is clearest
            hit = (mask[:, t:t + w].all(dim=1)
                   & (responses[:, t:t + w] == want).all(dim=1))
            found |= rows & hit
    return found.float()


VERIFIERS = {"exact": correctness, "contains": contains_sum}


@dataclass(frozen=True)
class AdditionTask:
    """All 10 000 prompts "ab+cd=", split once into training and held-out prompts.

    The split depends only on ``split_seed``, so every run (any RL seed) is evaluated on the
    same held-out prompts, and none of them is ever trained on (not even in the warm start).
    """
    heldout_questions: int = 500
    split_seed: int = 1234
    name: ClassVar[str] = "addition"
    config_fields: ClassVar[tuple] = ("heldout_questions",)
    policy: ClassVar[str] = "tiny_gpt"     # the token ids are the toy's
    prompt_len: ClassVar[int] = PROMPT_LEN
    vocab_size: ClassVar[int] = VOCAB_SIZE
    verifiers: ClassVar[dict] = VERIFIERS

    def _split(self) -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(self.split_seed)
        perm = torch.randperm(10_000, generator=g)
        return perm[self.heldout_questions:], perm[: self.heldout_questions]

    def prompts(self, split: str = "train") -> Tensor:
        """Prompt tokens [N, 6] of the "train" or "heldout" split (fixed order)."""
        train_ids, held_ids = self._split()
        ids = {"train": train_ids, "heldout": held_ids}.get(split)
        if ids is None:
            raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
        return encode_prompts(ids // 100, ids % 100)

    @staticmethod
    def reward(prompts: Tensor, responses: Tensor) -> Tensor:
        return correctness(prompts, responses)

    @staticmethod
    def warm_answers(prompts: Tensor, noise: float, generator: torch.Generator, max_len: int) -> Tensor:
        return imperfect_answers(prompts, noise, generator, max_len)

    @staticmethod
    def to_text(tokens) -> str:
        return to_text(tokens)


def imperfect_answers(prompts: Tensor, noise: float, generator: torch.Generator,
                      max_len: int) -> Tensor:
    """Warm-start targets [N, max_len]: the correct answer, or with probability ``noise`` a
    plausible wrong one, padded with PAD.

    Wrong answers imitate typical slips: a sum off by 1 or 10 (carry errors), one extra digit
    (too long) or a dropped last digit (too short). Generated by code, never downloaded.
    """
    a, b = decode_operands(prompts)
    target = (a + b).tolist()
    N = len(target)
    kind = torch.randint(0, 4, (N,), generator=generator).tolist()
    corrupt = (torch.rand(N, generator=generator) < noise).tolist()
    extra = torch.randint(0, 10, (N,), generator=generator).tolist()
    sign = torch.randint(0, 2, (N,), generator=generator).tolist()
    rows = []
    for i in range(N):
        toks = answer_tokens(target[i])
        if corrupt[i]:
            if kind[i] == 0:
                toks = answer_tokens(max(target[i] + (1 if sign[i] else -1), 0))
            elif kind[i] == 1:
                toks = answer_tokens(max(target[i] + (10 if sign[i] else -10), 0))
            elif kind[i] == 2:
                toks = toks[:-1] + [extra[i], EOS]
            elif len(toks) > 2:
                toks = toks[:-2] + [EOS]
            else:
                toks = answer_tokens((target[i] + 1 + extra[i]) % 199)
        toks = toks[:max_len]
        rows.append(toks + [PAD] * (max_len - len(toks)))
    return torch.tensor(rows, dtype=torch.long)


def carry_class(prompts: Tensor) -> list[str]:
    """Kind of each sum [N]: "no carry", "units carry" (a0 + b0 >= 10), "tens carry" (the tens
    overflow into a third digit without a units carry) or "both carry"."""
    a, b = decode_operands(prompts)
    units = (a % 10 + b % 10) >= 10
    tens = (a // 10 + b // 10 + units.long()) >= 10
    names = {(False, False): "no carry", (True, False): "units carry",
             (False, True): "tens carry", (True, True): "both carry"}
    return [names[(bool(u), bool(t))] for u, t in zip(units, tens)]


def addition_task(cfg) -> AdditionTask:
    """The addition task of a run config (``registry.TASKS["addition"]``)."""
    return AdditionTask(heldout_questions=cfg.heldout_questions)
