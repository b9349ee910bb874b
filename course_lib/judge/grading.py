"""Grading, run inside the worker subprocess: load a file, run its cases, compare, explain.

Nothing here is imported by the command-line front end, so torch is imported once per worker.
The reader's code runs under a time budget (SIGALRM), with its printed output captured, on
clones of the inputs; the reference solution and the known-wrong variants run outside the budget.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import numbers
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .cases import Case
from .messages import syntax_error_message
from .registry import Exercise

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


# ---------------------------------------------------------------- loading files

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


# ---------------------------------------------------------------- running one function

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


# ---------------------------------------------------------------- comparing

def _fmt(x) -> str:
    if isinstance(x, Tensor):
        x = x.item()
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, numbers.Real):
        return f"{float(x):.6g}"
    return repr(x)


def _index(flat: int, shape) -> tuple:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    if x is None:
        return "None"
    if isinstance(x, numbers.Real):
        return f"a {type(x).__name__} ({_fmt(x)})"
    return f"a {type(x).__name__}"


def compare(got, want, name: str, atol: float, rtol: float, mask: Tensor | None = None,
            names: tuple[str, ...] = (), what: str = "values") -> str | None:
    """None when got matches want; otherwise a message: what was expected, what came back.

    Any floating dtype is accepted for a floating result: both sides are compared in float64 at the
    case's tolerance, which is set for the inputs' dtype (``dtype_note`` says so to the reader).
    ``what`` names the entries in the message ("values", or "entries" of a gradient)."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return (f"{name}: expected a tuple of {len(want)} tensors, got {_describe(got)}"
                    + (" (did you forget `return`?)" if got is None else ""))
        names = names or tuple(f"{name}[{k}]" for k in range(len(want)))
        parts = [compare(a, b, n, atol, rtol, mask, what=what) for a, b, n in zip(got, want, names)]
        return "\n".join(p for p in parts if p) or None
    if isinstance(want, numbers.Real) and not isinstance(want, Tensor):
        if isinstance(got, Tensor):
            return (f"{name}: expected a Python float, got {_describe(got)}; "
                    "convert with float(...)")
        if not isinstance(got, numbers.Real) or isinstance(got, bool):
            return f"{name}: expected a Python float, got {_describe(got)}"
        got_f = float(got)
        if math.isnan(got_f):
            return f"{name}: got NaN, expected {_fmt(want)}"
        if not math.isclose(got_f, float(want), rel_tol=rtol, abs_tol=atol):
            return (f"{name}: expected {_fmt(want)}, got {_fmt(got_f)} "
                    f"(abs difference {abs(got_f - float(want)):.3g})")
        return None
    # tensors
    if not isinstance(got, Tensor):
        extra = " (did you forget `return`?)" if got is None else ""
        return f"{name}: expected {_describe(want)}, got {_describe(got)}{extra}"
    if got.shape != want.shape:
        return (f"{name}: expected shape {tuple(want.shape)}, got shape {tuple(got.shape)}"
                + (" (a scalar loss has shape ())" if want.dim() == 0 else ""))
    if want.is_floating_point() and not got.is_floating_point():
        return (f"{name}: expected a floating-point tensor ({want.dtype}), got {got.dtype}"
                + (" (integer division or an integer input left unconverted?)"
                   if not got.dtype == torch.bool else ""))
    g = got.detach().to(torch.float64)
    w = want.detach().to(torch.float64)
    where = ""

    def padding_note(idx):
        if mask is not None and tuple(mask.shape) == tuple(g.shape) and not bool(mask[idx]):
            return " (a padding position)"
        return ""

    bad_nan = (g.isnan() & ~w.isnan()) | (g.isinf() & ~w.isinf())
    if bad_nan.any() and g.dim() == 0:
        return f"{name}: got {_fmt(g)}, expected {_fmt(w)}"
    if bad_nan.any():
        idx = _index(int(bad_nan.reshape(-1).nonzero()[0]), g.shape) if g.dim() else ()
        where = f" at index {idx}" if idx else ""
        n = int(bad_nan.sum())
        note = padding_note(idx) if idx else ""
        return (f"{name}: {n} {what[:-1]}(s) are NaN or infinite; first{where}{note}, "
                f"where {_fmt(w[idx] if idx else w)} was expected")
    diff = (g - w).abs()
    bad = diff > atol + rtol * w.abs()
    bad = bad | (g.isnan() != w.isnan())
    if not bad.any():
        return None
    if g.dim() == 0:
        return f"{name}: expected {_fmt(w)}, got {_fmt(g)} (abs difference {float(diff):.3g})"
    idx = _index(int(bad.reshape(-1).nonzero()[0]), g.shape)
    finite = diff[~diff.isnan()]
    max_diff = float(finite.max()) if finite.numel() else float("nan")
    return (f"{name}: {int(bad.sum())} of {g.numel()} {what} differ; first at index {idx}"
            f"{padding_note(idx)}: expected {_fmt(w[idx])}, got {_fmt(g[idx])}; "
            f"max abs difference {max_diff:.3g}")


def _float_tensors(x) -> list[Tensor]:
    if isinstance(x, Tensor):
        return [x] if x.is_floating_point() else []
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _float_tensors(v)]
    return []


def dtype_note(got, want) -> str | None:
    """A note (not a failure) when a floating result's dtype differs from the reference's."""
    for g, w in zip(_float_tensors(got), _float_tensors(want)):
        if g.dtype != w.dtype:
            return (f"your result is {g.dtype} where the reference returns {w.dtype}: any floating "
                    f"dtype is accepted and compared at the tolerance set for the inputs (a trainer "
                    f"usually keeps the inputs' dtype)")
    return None


def close(a, b, atol=1e-5, rtol=1e-4) -> bool:
    """Loose equality used to recognise a known mistake."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(close(x, y, atol, rtol) for x, y in zip(a, b))
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return (a.shape == b.shape
                and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True)))
    if isinstance(a, numbers.Real) and isinstance(b, numbers.Real) and not isinstance(a, Tensor) \
            and not isinstance(b, Tensor):
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol)
    return False


NICE = {-1.0: "-1", 2.0: "2", 0.5: "1/2", 4.0: "4", 0.25: "1/4", -2.0: "-2", -0.5: "-1/2"}


def generic_hint(got, want, fn_name: str) -> str | None:
    """Shape-preserving mistakes any exercise can make: flipped sign, a constant factor."""
    if not (isinstance(got, Tensor) and isinstance(want, Tensor) and got.shape == want.shape
            and got.is_floating_point()):
        return None
    g, w = got.double().reshape(-1), want.double().reshape(-1)
    nz = w.abs() > 1e-6
    if not nz.any() or not bool(torch.isfinite(g).all()):
        return None
    if not bool(torch.allclose(g[~nz], torch.zeros_like(g[~nz]), atol=1e-6)):
        return None
    k = g[nz] / w[nz]
    k0 = float(k.mean())
    if float(k.max() - k.min()) > 1e-4 * max(abs(k0), 1e-12) or abs(k0 - 1) < 1e-3:
        return None
    nice = next((v for x, v in NICE.items() if abs(k0 - x) < 1e-4), None)
    if int(nz.sum()) < 2 and nice is None:
        return None
    if nice == "-1":
        msg = "Every value has the expected size but the opposite sign."
        if fn_name.endswith("_loss"):
            msg += (" A *_loss function returns what is minimised, the negative of the"
                    " objective a paper maximises.")
        return msg
    factor = nice if nice is not None else f"{k0:.4g}"
    return (f"Every value is {factor} times the expected one: a constant factor is missing or "
            "extra somewhere (a normaliser, a coefficient, a count).")


# ---------------------------------------------------------------- grading a file

def _flat(x) -> Tensor | None:
    if isinstance(x, (tuple, list)):
        parts = [_flat(v) for v in x]
        return None if any(p is None for p in parts) or not parts else torch.cat(parts)
    if isinstance(x, Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64).reshape(-1)
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return torch.tensor([float(x)], dtype=torch.float64)
    return None


def size_ratio(got, want, signed: bool = False) -> str | None:
    """How the entries that differ compare with the expected ones: 'yours / expected' as a median
    and a range (of |yours| / |expected| unless ``signed``). Used by ``judge.py check -v`` to show
    what a known-wrong variant does, so that its hint can be checked against it."""
    g, w = _flat(got), _flat(want)
    if g is None or w is None or g.shape != w.shape:
        return None
    differ = ((g - w).abs() > 1e-9 + 1e-6 * w.abs()) & (w.abs() > 1e-12) & g.isfinite()
    if not differ.any():
        return None
    r = g[differ] / w[differ]
    r = r if signed else r.abs()
    what = "yours / expected" if signed else "|yours| / |expected|"
    return (f"{what}: median {float(r.median()):.4g}, from {float(r.min()):.4g} to "
            f"{float(r.max()):.4g} over the {int(differ.sum())} entries that differ")


@dataclass
class Graded:
    name: str
    kind: str
    passed: bool
    message: str = ""
    hint: str | None = None
    note: str | None = None               # said to the reader without failing the case (a dtype)
    ratio: str | None = None              # size_ratio of a failed comparison (for check -v)
    candidates: list[str] = field(default_factory=list)   # known mistakes that fit this case

    def as_dict(self):
        return {"name": self.name, "kind": self.kind, "passed": self.passed,
                "message": self.message, "hint": self.hint, "ratio": self.ratio, "note": self.note}


class ExerciseKit:
    """Everything trusted about one exercise: its cases, reference outcomes, wrong variants."""

    def __init__(self, ex: Exercise):
        self.ex = ex
        checks = load_module(ex.dir / "checks.py", f"_judge_checks_{ex.id}")
        self.cases: list[Case] = checks.cases()
        self.reference = load_module(ex.solution, f"_judge_solution_{ex.id}")
        self.variants = []
        for p in ex.wrong_variants():
            mod = load_module(p, f"_judge_wrong_{ex.id}_{p.stem}")
            self.variants.append((p.stem, mod.HINT, mod))
        self._ref: dict[int, Outcome] = {}

    def reference_outcome(self, i: int) -> Outcome:
        if i not in self._ref:
            case = self.cases[i]
            out = evaluate(getattr(self.reference, case.fn), case)
            if out.error:
                raise RuntimeError(f"reference solution failed on case {case.name!r}: {out.error}")
            if case.expected is not None:
                out.value = case.expected
            if case.expected_grad is not None:
                out.grad = case.expected_grad
            self._ref[i] = out
        return self._ref[i]

    def recognise(self, i: int, got: Outcome, part: str) -> str | None:
        """The hint of a known-wrong variant that is wrong on this case the way the reader is."""
        found = self.recognise_all(i, got, part)
        return found[0] if found else None

    def recognise_all(self, i: int, got: Outcome, part: str) -> list[str]:
        """The hints of every known-wrong variant that is wrong on this case the way the reader is
        (two mistakes can agree on one case; grade_file then keeps the one that fits most cases)."""
        case, ref = self.cases[i], self.reference_outcome(i)
        found = []
        for _, hint, mod in self.variants:
            fn = getattr(mod, case.fn, None)
            if fn is None:
                continue
            theirs = evaluate(fn, case)
            if theirs.error:
                continue
            if case.score is not None:          # scored: the variant falls short and agrees exactly
                if part == "value" and case.score(theirs.value) is not None and theirs.value == got.value:
                    found.append(hint)
                continue
            value_wrong = compare(theirs.value, ref.value, "", case.atol, case.rtol) is not None
            if part == "value":
                fails_check = case.check is not None and case.check(theirs.value) is not None
                if (value_wrong or fails_check) and close(got.value, theirs.value):
                    found.append(hint)
            elif part == "has_grad":
                if not value_wrong and theirs.has_grad and close(got.value, theirs.value):
                    found.append(hint)
            elif part == "grad" and got.grad is not None and theirs.grad is not None \
                    and ref.grad is not None and not value_wrong \
                    and not close(theirs.grad, ref.grad.to(theirs.grad.dtype), atol=case.grad_atol,
                                  rtol=1e-6) \
                    and close(got.grad, theirs.grad, atol=1e-7, rtol=1e-5):
                found.append(hint)
        return found


def grade_file(kit: ExerciseKit, path: Path, time_limit: float, sample: bool = False) -> dict:
    """Grade one file against one exercise. Returns a JSON-ready dict (see report.py)."""
    ex = kit.ex
    result = {"exercise": ex.id, "file": str(path), "status": "failed", "cases": [],
              "passed": 0, "total": 0, "hints": [], "error": None, "output": "",
              "sample": sample}
    budget = Budget(time_limit)
    indices = [i for i, c in enumerate(kit.cases) if c.sample or not sample]
    result["total"] = len(indices)
    for i in indices:                     # before the reader's code can change any global state
        kit.reference_outcome(i)
    try:
        try:
            with budget.running():
                module = load_module(path, f"_judge_submission_{ex.id}")
        except TimeLimit:
            raise
        except NotImplementedError as exc:
            result.update(status="not_implemented", error=trimmed_traceback(exc, path))
            return result
        except SyntaxError as exc:
            result.update(status="syntax_error", error=syntax_error_message(exc))
            return result
        except BaseException as exc:
            result.update(status="error",
                          error="Your file raised an error while loading:\n"
                                + trimmed_traceback(exc, path))
            return result
        missing = [f for f in ex.functions if not callable(getattr(module, f, None))]
        if missing:
            defined = sorted(n for n, v in vars(module).items()
                             if callable(v) and getattr(v, "__module__", None) == module.__name__)
            result.update(status="error", error=(
                f"your file defines no function called {', '.join(missing)}"
                + (f" (it defines: {', '.join(defined)})" if defined else "")
                + f". The exercise asks for: {', '.join(ex.functions)}."))
            return result

        hints: list[str] = []
        graded_cases = []
        for i in indices:
            case = kit.cases[i]
            graded_cases.append(_grade_case(kit, i, getattr(module, case.fn), budget, path))
        fits = {}                          # how many cases each known mistake explains
        for graded in graded_cases:
            for h in graded.candidates:
                fits[h] = fits.get(h, 0) + 1
        for graded in graded_cases:
            if len(graded.candidates) > 1:
                graded.hint = max(graded.candidates, key=lambda h: fits[h])   # first among equals
            result["cases"].append(graded.as_dict())
            if graded.hint and graded.hint not in hints:
                hints.append(graded.hint)
        result["passed"] = sum(c["passed"] for c in result["cases"])
        result["hints"] = hints
        result["notes"] = list(dict.fromkeys(c["note"] for c in result["cases"] if c["note"]))
        not_impl = [c for c in result["cases"] if c["message"].startswith("not implemented")]
        if result["passed"] == result["total"]:
            result["status"] = "passed"
        elif len(not_impl) == result["total"]:
            result["status"] = "not_implemented"
        else:
            result["status"] = "failed"
    except TimeLimit:
        result.update(status="timeout", error=(
            f"time limit exceeded: your code ran for more than {time_limit:g} s in total "
            "(an infinite loop, or a Python loop over every element?)"))
        result["passed"] = sum(c["passed"] for c in result["cases"])
        result["total"] = result["total"] or len(kit.cases)
    finally:
        result["output"] = budget.out.text()
    return result


NAN_HINT = ("This case puts NaN in padding positions, and it reached your result. Multiplying by the "
            "mask does not remove a NaN (NaN times 0 is NaN), and a NaN that passes through exp or "
            "a division poisons the gradient even where the value is later masked: select the valid "
            "entries (torch.where) before computing with them.")


def _has_nan(x) -> bool:
    if isinstance(x, Tensor):
        return x.is_floating_point() and bool(x.isnan().any())
    if isinstance(x, (tuple, list)):
        return any(_has_nan(v) for v in x)
    return isinstance(x, float) and math.isnan(x)


ZERO_DIV_HINT = ("Your result contains NaN although the inputs hold none: a division by a count that can "
                 "be 0 here (an empty response, or no valid token at all)? Such counts need a floor "
                 "of 1, e.g. .clamp_min(1).")


def _nan_hint(case: Case, got) -> str | None:
    if not _has_nan(got):
        return None
    inputs = list(case.args.values()) + list(case.kwargs.values())
    return NAN_HINT if any(_has_nan(v) for v in inputs) else ZERO_DIV_HINT


def _grade_case(kit: ExerciseKit, i: int, fn, budget: Budget, path: Path) -> Graded:
    case = kit.cases[i]
    g = Graded(case.name, case.kind, False)
    got = evaluate(fn, case, budget, path)
    if got.not_implemented:
        g.message = f"not implemented yet: {case.fn} raises NotImplementedError"
        return g
    if got.error:
        g.message = f"your code raised an exception:\n{got.error}"
        if "in-place operation" in got.error:
            g.message += ("\n(an input that requires grad was changed in place; inputs must stay "
                          "untouched: work on a copy)")
        return g
    if got.mutated:
        names = ", ".join(f"`{m}`" for m in got.mutated)
        g.message = (f"your function changed its input {names} in place (e.g. with `-=`, "
                     "`.clamp_()`, or indexing assignment); work on a copy instead")
        return g
    if case.score is not None:
        msg = case.score(got.value)
        if msg:
            g.message = msg
            g.candidates = kit.recognise_all(i, got, "value")
            g.hint = (g.candidates or [None])[0]
            return g
        g.passed = True
        g.note = case.summary(got.value) if case.summary is not None else None
        return g
    ref = kit.reference_outcome(i)
    mask = case.args.get("mask", case.kwargs.get("mask"))
    label = f"{case.fn}(...)"
    msg = compare(got.value, ref.value, label, case.atol, case.rtol, mask, case.out_names)
    g.note = dtype_note(got.value, ref.value)
    if msg:
        if case.kind == "grad":
            msg = f"this case grades the gradient, but the value is already wrong:\n{msg}"
        g.message = msg + (f"\n({g.note})" if g.note else "")
        g.note = None
        g.candidates = kit.recognise_all(i, got, "value")
        g.hint = ((g.candidates or [None])[0] or _nan_hint(case, got.value)
                  or generic_hint(got.value, ref.value, case.fn))
        g.ratio = size_ratio(got.value, ref.value)
        return g
    if case.out_grad == "required" and got.has_grad is False:
        g.message = (f"the result has the right value but carries no gradient (requires_grad is "
                     f"False although `{case.grad_wrt}` requires grad): something on the way was "
                     "detached, or built with .item(), float() or numpy")
        return g
    if case.out_grad == "forbidden" and got.has_grad:
        g.message = (f"the result carries a gradient (requires_grad is True because "
                     f"`{case.grad_wrt}` requires grad); these values must be constants: detach them")
        g.hint = kit.recognise(i, got, "has_grad")
        return g
    if ref.grad is not None:
        if got.grad is None:
            g.message = (f"the result carries no gradient with respect to `{case.grad_wrt}`: "
                         "something on the way was detached")
            return g
        msg = compare(got.grad, ref.grad.to(got.grad.dtype), f"d/d{case.grad_wrt} of {case.fn}(...)",
                      case.grad_atol, 1e-6, mask, what="entries")
        if msg:
            g.message = (f"the value is right, the gradient with respect to `{case.grad_wrt}` is "
                         f"not:\n{msg}")
            g.hint = kit.recognise(i, got, "grad") or _nan_hint(case, got.grad)
            g.ratio = "gradient " + (size_ratio(got.grad, ref.grad, signed=True) or "")
            return g
    if case.check is not None:
        msg = case.check(got.value)
        if msg:
            g.message = msg
            g.hint = kit.recognise(i, got, "value")
            return g
    g.passed = True
    return g
