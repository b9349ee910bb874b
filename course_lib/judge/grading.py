"""Grading, run inside the worker subprocess: load a file, run its cases, compare, explain.

Nothing here is imported by the command-line front end, so torch is imported once per worker.
``ExerciseKit`` holds what is trusted about an exercise (its cases, the reference's outcomes, the
known-wrong variants and their hints); ``grade_file`` runs a reader's file through every case. The
pieces, by topic: ``sandbox`` runs the reader's code under its time budget, ``comparison`` sets a result
beside the expected one, ``mistakes`` names the mistakes any exercise can make.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .cases import Case
from .comparison import close, compare, dtype_note, size_ratio  # noqa: F401 (re-exported)
from .messages import syntax_error_message
from .mistakes import _nan_hint, generic_hint  # noqa: F401 (re-exported)
from .registry import Exercise
from .sandbox import (Budget, Outcome, TimeLimit, evaluate, grad_weights,  # noqa: F401
                      load_module, trimmed_traceback)


# ---------------------------------------------------------------- grading a file

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
