"""A toy task with long answers: three-digit addition written out column by column.

A prompt is "abc+def=" (operands 0..999, zero-padded, so every prompt has 8 tokens). A response
may work the sum out on a scratchpad before it answers: one step per column, units first, each
step ending in ';', then the answer marker '>', the sum without leading zeros, and EOS:

    "457+168="  ->  "7+8=5c;5+6=2c;4+1=6;>625<eos>"      (every column: 25 tokens)

``c`` marks a carry out of the column; the next step's sum includes it. Shorter styles write only
each column's digit and carry ("5c;2c;6;>625<eos>") or only the answer (">625<eos>"); the longest
writes every column twice (a re-check before answering, 39 to 48 tokens). Only the answer is graded:
the reward is 1 exactly when the digits between the last '>' and the first EOS are the sum, so RL
is free to make responses longer or shorter. A response that reaches the budget without EOS
earns 0 (truncated).

Token ids: digits 0-9, '+' 10, '=' 11, EOS 12, PAD 13 (as in the addition task), then ';' 14,
'c' 15 and '>' 16.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from .tokens import EOS, EQUALS, PAD, PLUS, response_mask

SEP, CARRY, ANSWER = 14, 15, 16
VOCAB_SIZE = 17
DIGITS = 3                                  # operand digits; prompts "abc+def=" have 2 * 3 + 2 tokens
STYLES = ("answer", "carries", "columns", "recheck")
SLIPS = ("digit", "carry", "copy")
_SYMBOLS = {PLUS: "+", EQUALS: "=", EOS: "<eos>", PAD: ".", SEP: ";", CARRY: "c", ANSWER: ">"}


def encode_prompts(a: Tensor, b: Tensor, digits: int = DIGITS) -> Tensor:
    """Operands a, b [N] (ints in 0 .. 10**digits - 1) -> prompt tokens [N, 2 * digits + 2]."""
    top = 10 ** digits - 1
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Tensor) or x.dim() != 1 or x.is_floating_point():
            raise ValueError(f"{name} must be a 1-d integer tensor, got {x!r}")
        if ((x < 0) | (x > top)).any():
            raise ValueError(f"{name} must lie in 0..{top}")
    def cols(x):
        return [x // 10 ** (digits - 1 - k) % 10 for k in range(digits)]      # most significant first
    return torch.stack([*cols(a), torch.full_like(a, PLUS), *cols(b), torch.full_like(a, EQUALS)], dim=1)


def decode_operands(prompts: Tensor, digits: int = DIGITS) -> tuple[Tensor, Tensor]:
    """Prompt tokens [N, 2 * digits + 2] -> (a, b) [N]."""
    weights = 10 ** torch.arange(digits - 1, -1, -1, device=prompts.device)            # [digits]
    return (prompts[:, :digits] * weights).sum(1), (prompts[:, digits + 1: 2 * digits + 1] * weights).sum(1)


def to_text(tokens) -> str:
    """Token ids -> a readable string."""
    return "".join(_SYMBOLS.get(int(t), str(int(t))) for t in tokens)


def trace(a: int, b: int, style: str = "columns", slip: str | None = None, column: int = 0,
          digits: int = DIGITS) -> list[int]:
    """The response tokens for a + b in a ``style`` of STYLES, EOS included.

    ``slip`` (one of SLIPS) writes a plausible mistake at ``column`` (0 = units): "digit" writes that
    column's sum digit one too high (mod 10) and carries on from it; "carry" forgets the column's
    carry out; "copy" works every column right and miscopies the answer's units digit. The answer is
    what the scratchpad computed, so a slip in a column makes the answer wrong too; in the style
    "answer", where there is no scratchpad, any slip changes the units digit.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    if slip is not None and slip not in SLIPS:
        raise ValueError(f"slip must be None or one of {SLIPS}, got {slip!r}")
    if not 0 <= column < digits:
        raise ValueError(f"column must be in 0..{digits - 1}, got {column!r}")
    steps, out_digits, carry = [], [], 0
    for k in range(digits):                                   # units first
        x, y = a // 10 ** k % 10, b // 10 ** k % 10
        total = x + y + carry
        s, carry = total % 10, total // 10
        if slip == "digit" and k == column:
            s = (s + 1) % 10
        if slip == "carry" and k == column:
            carry = 0
        out_digits.append(s)
        steps.append((x, y, s, carry))
    if carry:
        out_digits.append(carry)
    answer = [int(c) for c in str(int("".join(map(str, reversed(out_digits)))))]   # no leading zeros
    if slip == "copy" or (style == "answer" and slip is not None):
        answer[-1] = (answer[-1] + 1) % 10
    pad: list[int] = []
    for x, y, s, c in steps:
        if style in ("columns", "recheck"):
            pad += [x, PLUS, y, EQUALS, s]
        elif style == "carries":
            pad += [s]
        if style != "answer":
            pad += [CARRY] * c + [SEP]
    if style == "recheck":
        pad = pad + pad
    return pad + [ANSWER] + answer + [EOS]


def _answer_span(responses: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per row: whether it has EOS, the position of its first EOS, of the last '>' before it [B]
    (-1 when none)."""
    B, T = responses.shape
    valid = response_mask(responses)
    is_eos = (responses == EOS) & valid
    has_eos = is_eos.any(dim=1)
    pos = torch.arange(T, device=responses.device).expand(B, T)
    eos_pos = torch.where(is_eos, pos, T).min(dim=1).values                      # T when there is none
    marker = (responses == ANSWER) & valid
    last_marker = torch.where(marker, pos, -1).max(dim=1).values
    return has_eos, eos_pos, last_marker


def correctness(prompts: Tensor, responses: Tensor, digits: int = DIGITS) -> Tensor:
    """0/1 reward [B]: the digits between the last '>' and the first EOS are exactly the sum, without
    leading zeros. The scratchpad is not graded; no EOS (truncated) or no '>' earns 0.

    prompts [B, 2 * digits + 2], responses [B, T] (PAD after EOS).
    """
    a, b = decode_operands(prompts, digits)
    target = a + b                                                               # [B]
    has_eos, eos_pos, start = _answer_span(responses)
    B, T = responses.shape
    value = torch.zeros(B, dtype=torch.long, device=responses.device)
    all_digits = torch.ones(B, dtype=torch.bool, device=responses.device)
    first = torch.full((B,), -1, dtype=torch.long, device=responses.device)
    for t in range(T):
        inside = (t > start) & (t < eos_pos)
        tok = responses[:, t]
        all_digits &= ~inside | (tok <= 9)
        first = torch.where(inside & (t == start + 1), tok, first)
        value = torch.where(inside, value * 10 + tok.clamp(max=9), value)
    n_digits = eos_pos - start - 1
    width = 1 + (target >= 10).long() + (target >= 100).long() + (target >= 1000).long()
    ok = has_eos & (start >= 0) & all_digits & (n_digits == width) & (value == target)
    return ok.float()


def _well_formed(row: list[int]) -> bool:
    """One response (tokens up to its first EOS, EOS included) in the format: steps of the forms
    "x+y=s", "x+y=sc", "s" or "sc", each ending in ';', then '>', 1 to 4 digits without a leading
    zero, EOS."""
    if not row or row[-1] != EOS or row.count(ANSWER) != 1:
        return False
    cut = row.index(ANSWER)
    pad, answer = row[:cut], row[cut + 1:-1]
    if not 1 <= len(answer) <= 4 or any(t > 9 for t in answer) or (len(answer) > 1 and answer[0] == 0):
        return False
    if pad and pad[-1] != SEP:
        return False
    steps, step = [], []
    for t in pad:
        if t == SEP:
            steps.append(step)
            step = []
        else:
            step.append(t)
    for st in steps:
        body = st[:-1] if st and st[-1] == CARRY else st
        if len(body) == 1 and body[0] <= 9:
            continue
        if len(body) == 5 and body[1] == PLUS and body[3] == EQUALS and all(body[i] <= 9 for i in (0, 2, 4)):
            continue
        return False
    return True


def well_formed(prompts: Tensor, responses: Tensor) -> Tensor:
    """A second reward term, 0/1 [B]: the response is in the task's format (``_well_formed``),
    whether or not its answer is right. prompts are unused (the signature of a verifier)."""
    has_eos, eos_pos, _ = _answer_span(responses)
    rows = responses.tolist()
    out = [float(bool(e) and _well_formed(r[: int(p) + 1])) for r, e, p in zip(rows, has_eos.tolist(), eos_pos.tolist())]
    return torch.tensor(out, device=responses.device)


VERIFIERS = {"exact": correctness, "format": well_formed}


@dataclass(frozen=True)
class ScratchpadTask:
    """Three-digit addition with a scratchpad: all 10**6 prompts "abc+def=", split once into training
    and held-out prompts by ``split_seed``; warm-start answers mix the four STYLES by ``style_shares``
    (answer only, column digits and carries, every column, every column twice)."""
    heldout_questions: int = 500
    split_seed: int = 4321
    style_shares: tuple = (0.25, 0.25, 0.3, 0.2)
    name: ClassVar[str] = "scratchpad"
    config_fields: ClassVar[tuple] = ("heldout_questions",)
    policy: ClassVar[str] = "tiny_gpt"     # the token ids are the toy's
    prompt_len: ClassVar[int] = 2 * DIGITS + 2
    vocab_size: ClassVar[int] = VOCAB_SIZE
    verifiers: ClassVar[dict] = VERIFIERS

    def __post_init__(self):
        shares = self.style_shares
        if len(shares) != len(STYLES) or any(s < 0 for s in shares) or abs(sum(shares) - 1) > 1e-9:
            raise ValueError(f"style_shares must be {len(STYLES)} shares >= 0 summing to 1 (for {STYLES}), "
                             f"got {shares!r}")

    def prompts(self, split: str = "train") -> Tensor:
        """Prompt tokens [N, 8] of the "train" or "heldout" split (fixed order)."""
        n = 10 ** (2 * DIGITS)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(self.split_seed))
        ids = {"train": perm[self.heldout_questions:], "heldout": perm[: self.heldout_questions]}.get(split)
        if ids is None:
            raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
        return encode_prompts(ids // 10 ** DIGITS, ids % 10 ** DIGITS)

    def warm_answers(self, prompts: Tensor, noise: float, generator: torch.Generator, max_len: int) -> Tensor:
        """Warm-start targets [N, max_len]: a trace in a style drawn by ``style_shares``, with
        probability ``noise`` a slip (kind and column drawn uniformly), cut to max_len, PAD after."""
        a, b = decode_operands(prompts)
        N = len(a)
        style = torch.multinomial(torch.tensor(self.style_shares, dtype=torch.float64), N, replacement=True,
                                  generator=generator).tolist()
        slipped = (torch.rand(N, generator=generator) < noise).tolist()
        kind = torch.randint(len(SLIPS), (N,), generator=generator).tolist()
        column = torch.randint(DIGITS, (N,), generator=generator).tolist()
        rows = []
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            toks = trace(x, y, STYLES[style[i]], SLIPS[kind[i]] if slipped[i] else None, column[i])[:max_len]
            rows.append(toks + [PAD] * (max_len - len(toks)))
        return torch.tensor(rows, dtype=torch.long)

    @staticmethod
    def to_text(tokens) -> str:
        return to_text(tokens)



def scratchpad_task(cfg) -> ScratchpadTask:
    """The scratchpad task of a run config (``registry.TASKS["scratchpad"]``)."""
    return ScratchpadTask(heldout_questions=cfg.heldout_questions)
