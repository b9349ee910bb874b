"""What a check is made of: the ``Case`` record and helpers that build reproducible inputs.

Each ``exercises/<id>/checks.py`` defines ``cases() -> list[Case]``. A case calls one function of
the reader's file with fixed inputs and compares the result with a known answer (``expected``) or,
when none is given, with the reference solution. A case with ``grad_wrt`` also compares the
gradient of the output with respect to that argument (float64 inputs there), so that a missing or
misplaced ``detach`` fails even when the values agree.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

KINDS = ("fixed", "random", "edge", "grad")


@dataclass
class Case:
    name: str                                   # what the case is about, shown to the reader
    fn: str                                     # which function of the file to call
    args: dict[str, Any]                        # positional arguments, by name (order matters)
    kwargs: dict[str, Any] = field(default_factory=dict)
    kind: str = "random"                        # fixed | random | edge | grad
    expected: Any = None                        # known answer; None: the reference's output
    expected_grad: Tensor | None = None         # known gradient w.r.t. grad_wrt (optional)
    grad_wrt: str | None = None                 # argument whose gradient is compared
    out_grad: str | None = None                 # "required" (must carry a gradient) or "forbidden"
    atol: float = 1e-5
    rtol: float = 1e-4
    grad_atol: float = 1e-7
    sample: bool = False                        # part of `judge.py test --sample`
    out_names: tuple[str, ...] = ()             # names of the parts of a tuple result
    check: Callable[[Any], str | None] | None = None   # extra property: message when violated
    # ``call(fn, *args)`` runs the reader's function in a harness (once per stored run, once per
    # piece of a split batch) instead of calling it once; with ``score(value)`` the case is graded by
    # a score (a message when the value falls short), without it by equality like any other case
    call: Callable[..., Any] | None = None
    score: Callable[[Any], str | None] | None = None
    summary: Callable[[Any], str] | None = None  # a scored case's result in words, shown when it passes

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Case.kind must be one of {KINDS}, got {self.kind!r}")
        if self.score is not None and self.call is None:
            raise ValueError(f"Case {self.name!r}: a scored case needs both call and score")
        if self.grad_wrt is not None and self.grad_wrt not in self.args:
            raise ValueError(f"Case {self.name!r}: grad_wrt={self.grad_wrt!r} is not an argument")


def gen(seed: int) -> torch.Generator:
    """A private generator: checks never depend on (or change) the global random state."""
    return torch.Generator().manual_seed(seed)


def lengths_mask(lengths, T: int) -> Tensor:
    """bool [B, T] with the first lengths[i] positions of row i True (right padding)."""
    lengths = torch.as_tensor(lengths)
    return torch.arange(T)[None, :] < lengths[:, None]


def random_mask(g: torch.Generator, B: int, T: int, min_len: int = 1) -> Tensor:
    """Right-padded mask [B, T] with random lengths in [min_len, T]."""
    lengths = torch.randint(min_len, T + 1, (B,), generator=g)
    return lengths_mask(lengths, T)


def poison(x: Tensor, mask: Tensor, value: float | None = None, g: torch.Generator | None = None) -> Tensor:
    """x with its padding replaced by ``value`` (NaN, a huge number) or by random junk."""
    if value is None:
        junk = 50 * torch.randn(x.shape, generator=g, dtype=x.dtype)
    else:
        junk = torch.full_like(x, value)
    return torch.where(mask, x, junk)


def logps(g: torch.Generator, B: int, T: int, spread: float = 0.3, dtype=torch.float32):
    """(logp, old_logp): log-probabilities in (-inf, 0) and a nearby old policy (log-ratio ~ spread)."""
    old_logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3 - 0.05
    logp = old_logp + spread * torch.randn(B, T, generator=g, dtype=torch.float64)
    return logp.to(dtype), old_logp.to(dtype)


def loss_edge_cases(fn: str, g: torch.Generator, logp: Tensor, old_logp: Tensor, *,
                    one_token: str | None = "edge: one-token responses", **grad_opts) -> list[Case]:
    """The edge cases every policy-loss exercise shares.

    A batch with no valid token must give a loss of 0; with ``one_token`` (a case name), responses of
    a single token are graded on their gradient too. ``logp``/``old_logp`` are [B, T] float64.
    """
    B, T = logp.shape
    out = [Case("edge: no valid token at all gives 0", fn,
                {"logp": logp.float(), "old_logp": old_logp.float(), "adv": torch.ones(B),
                 "mask": torch.zeros(B, T, dtype=torch.bool)}, kind="edge", expected=torch.tensor(0.0))]
    if one_token is not None:
        ones = torch.zeros(B, T, dtype=torch.bool)
        ones[:, 0] = True
        out.append(Case(one_token, fn,
                        {"logp": logp, "old_logp": old_logp,
                         "adv": torch.randn(B, generator=g, dtype=torch.float64), "mask": ones},
                        kind="grad", grad_wrt="logp", out_grad="required", **grad_opts))
    return out


def random_loss_cases(fn: str, g: torch.Generator, kwargs: dict, label: str, *, spread: float,
                      sample: bool = False, B: int = 8, T: int = 12) -> list[Case]:
    """A random batch graded on its value (float32), then a fresh float64 batch graded on its gradient.

    ``label`` ends both case names ("random: values<label>", "random: gradient w.r.t. logp<label>").
    """
    logp, old_logp = logps(g, B, T, spread=spread)
    mask = random_mask(g, B, T)
    adv = torch.randn(B, generator=g)
    values = Case(f"random: values{label}", fn,
                  {"logp": logp, "old_logp": old_logp, "adv": adv, "mask": mask}, kwargs,
                  grad_wrt="logp", out_grad="required", sample=sample)
    logp, old_logp = logps(g, B, T, spread=spread, dtype=torch.float64)
    grad = Case(f"random: gradient w.r.t. logp{label}", fn,
                {"logp": logp, "old_logp": old_logp, "adv": adv.double(), "mask": mask}, kwargs,
                kind="grad", grad_wrt="logp", out_grad="required")
    return [values, grad]
