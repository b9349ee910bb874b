"""Running the reader's code, inside the worker subprocess: a time budget (SIGALRM) summed over loading and
every call, its printed output captured, fresh clones of the inputs, and what came back recorded:
value, gradient, whether it carries one, the reader's exception (trimmed to their own frames), and
any input changed in place. The reference solution and the known-wrong variants run outside the budget.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .cases import Case

OUTPUT_LIMIT = 4000            # characters of the reader's printed output kept


class TimeLimit(BaseException):
    """Raised in the reader's code when its time budget is spent (a BaseException, so that a
    bare ``except Exception`` in the reader's code cannot swallow it)."""


class _Bounded(io.TextIOBase):
    """A stdout replacement that keeps only the first OUTPUT_LIMIT characters."""

    def __init__(self):
        self.parts: list[str] = []
        self.size = 0

    def writable(self):
        return True

    def write(self, s):
        if self.size < OUTPUT_LIMIT:
            self.parts.append(s[: OUTPUT_LIMIT - self.size])
        self.size += len(s)
        return len(s)

    def text(self) -> str:
        out = "".join(self.parts)
        return out + ("\n... (output cut)" if self.size > OUTPUT_LIMIT else "")


class Budget:
    """Time budget for the reader's code, summed over loading and every call."""

    def __init__(self, seconds: float):
        self.left = float(seconds)
        self.out = _Bounded()

    @contextlib.contextmanager
    def running(self):
        if self.left <= 0:
            raise TimeLimit()

        def on_alarm(signum, frame):
            raise TimeLimit()

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.left)
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(self.out), contextlib.redirect_stderr(self.out):
                yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            self.left -= time.perf_counter() - start


def load_module(path: Path, name: str):
    """Execute a Python file as a fresh module (not registered in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trimmed_traceback(exc: BaseException, path: Path | str) -> str:
    """The traceback limited to frames in the reader's file, then the exception line."""
    real = os.path.realpath(str(path))
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.realpath(f.filename) == real]
    lines = []
    if frames:
        lines.append("Traceback (your code only):")
        lines += [s.rstrip("\n") for s in traceback.format_list(frames)]
    lines += [s.rstrip("\n") for s in traceback.format_exception_only(type(exc), exc)]
    return "\n".join(lines)


@dataclass
class Outcome:
    value: Any = None
    grad: Tensor | None = None
    has_grad: bool | None = None          # did the output carry a gradient?
    error: str | None = None              # the reader's exception, trimmed
    not_implemented: bool = False
    mutated: list[str] = field(default_factory=list)


def _clone(x):
    return x.detach().clone() if isinstance(x, Tensor) else x


def _detached(out):
    if isinstance(out, Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_detached(o) for o in out)
    return out


def _same(a: Tensor, b: Tensor) -> bool:
    """Equal, counting NaN == NaN (to detect in-place changes of poisoned inputs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool((a == b).all())


def grad_weights(out: Tensor) -> Tensor:
    """Fixed random weights w so that grad of (w * out).sum() tests every output entry."""
    g = torch.Generator().manual_seed(20250)
    return torch.rand(out.shape, generator=g, dtype=torch.float64).to(out.dtype) + 0.5


def evaluate(fn, case: Case, budget: Budget | None = None, path=None) -> Outcome:
    """Call fn on fresh clones of the case's inputs; record value, gradient and side effects."""
    args = {k: _clone(v) for k, v in case.args.items()}
    kwargs = {k: _clone(v) for k, v in case.kwargs.items()}
    leaf = None
    if case.grad_wrt is not None:
        leaf = args[case.grad_wrt].requires_grad_(True)
    before = {k: v.detach().clone() for k, v in {**args, **kwargs}.items() if isinstance(v, Tensor)}
    res = Outcome()
    ctx = budget.running() if budget is not None else contextlib.nullcontext()
    try:
        with ctx:
            out = (case.call(fn, *args.values(), **kwargs) if case.call is not None
                   else fn(*args.values(), **kwargs))
            if case.grad_wrt is not None and isinstance(out, Tensor) and out.is_floating_point():
                res.has_grad = bool(out.requires_grad)
                if out.requires_grad and (case.expected_grad is not None or case.kind == "grad"):
                    scalar = out if out.dim() == 0 else (out * grad_weights(out)).sum()
                    (grad,) = torch.autograd.grad(scalar, leaf, allow_unused=True)
                    res.grad = torch.zeros_like(leaf) if grad is None else grad.detach().clone()
    except TimeLimit:
        raise
    except NotImplementedError as exc:
        res.not_implemented = True
        res.error = trimmed_traceback(exc, path) if path else repr(exc)
        return res
    except BaseException as exc:                       # the reader's bug, reported, never raised
        res.error = trimmed_traceback(exc, path) if path else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, Exception):
            res.error += f"\n({type(exc).__name__} stops the judge only for this case)"
        return res
    res.value = _detached(out)
    res.mutated = [k for k, v in {**args, **kwargs}.items()
                   if isinstance(v, Tensor) and not _same(v.detach(), before[k])]
    return res
