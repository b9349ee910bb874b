"""Grading a function defined in a notebook cell: ``check("ex01_group_advantages", group_advantages)``.

The function's source (via ``inspect.getsource``), the helper functions and modules it refers to,
and simple constants are written to ``workspace/.notebook_<id>.py`` and graded in a subprocess,
exactly like a file.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import types
from dataclasses import dataclass

from . import progress, report
from .registry import UsageError, get_exercise, workspace_dir
from .runner import DEFAULT_TIME_LIMIT, grade

HEADER = "import math\nimport torch\nfrom torch import Tensor\n"


@dataclass
class JudgeResult:
    exercise: str
    status: str
    passed_cases: int
    total_cases: int
    details: dict

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"<judge: {self.exercise} {self.status} {self.passed_cases}/{self.total_cases}>"


class SourceError(Exception):
    pass


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


def _source(fn) -> str:
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError) as exc:
        raise SourceError(
            f"could not read the source of `{getattr(fn, '__name__', fn)}` ({exc}). Functions typed "
            "into a plain Python prompt have no source: put it in a file and run "
            "`python judge.py test ID FILE`, or define it in a notebook cell.") from None
    src = textwrap.dedent(src)
    try:
        tree = ast.parse(src)
    except SyntaxError:
        raise SourceError(f"the source of `{fn.__name__}` could not be parsed on its own") from None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        raise SourceError(f"`{getattr(fn, '__name__', fn)}` is not defined with `def` "
                          "(a lambda?); write it as a `def` function")
    node.decorator_list = []                       # decorators may not exist in the file
    return ast.unparse(node) if hasattr(ast, "unparse") else src


def build_source(functions: dict, expected: tuple[str, ...]) -> str:
    """Python source defining every expected function plus what they use from the notebook."""
    parts, done, notes = [HEADER], set(), []
    imports: list[str] = []

    def add(fn):
        fn = inspect.unwrap(fn)
        if id(fn) in done:
            return
        done.add(id(fn))
        if not isinstance(fn, (types.FunctionType, type)):
            raise SourceError(f"`{fn!r}` is not a Python function")
        if isinstance(fn, types.FunctionType) and fn.__closure__:
            raise SourceError(f"`{fn.__name__}` is defined inside another function; define it at "
                              "the top level of a cell")
        src = _source(fn)
        glb = getattr(fn, "__globals__", {})
        code = getattr(fn, "__code__", None)
        for name in sorted(_names(code)) if code else []:
            if name not in glb or name in ("torch", "math", "Tensor"):
                continue
            obj = glb[name]
            if isinstance(obj, types.ModuleType):
                imports.append(f"import {obj.__name__} as {name}" if obj.__name__ != name
                               else f"import {name}")
            elif isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", "") in (
                    "__main__", fn.__module__) and not name.startswith("__"):
                add(obj)
            elif isinstance(obj, (types.FunctionType, type, types.BuiltinFunctionType)):
                mod = getattr(obj, "__module__", None)
                if mod and mod != "__main__":
                    imports.append(f"from {mod} import {obj.__name__} as {name}")
            elif isinstance(obj, (int, float, str, bool, tuple)) and _literal(obj):
                imports.append(f"{name} = {obj!r}")
            else:
                notes.append(name)
        parts.append(src)

    for fn in functions.values():
        add(fn)
    for want, fn in functions.items():
        if getattr(fn, "__name__", want) != want:
            parts.append(f"{want} = {fn.__name__}")
    if notes:
        raise SourceError(f"your function uses {', '.join(sorted(set(notes)))} from the notebook, "
                          "which the judge cannot copy; define it inside the function")
    head, body = parts[0], parts[1:]
    return head + "\n".join(dict.fromkeys(imports)) + "\n\n\n" + "\n\n\n".join(body) + "\n"


def _literal(obj) -> bool:
    try:
        return ast.literal_eval(repr(obj)) == obj
    except (ValueError, SyntaxError):
        return False


def check(exercise: str, *functions, timeout: float = DEFAULT_TIME_LIMIT, sample: bool = False,
          quiet: bool = False) -> JudgeResult:
    """Grade functions defined in a notebook, e.g. ``check("ex04", kl_k1, kl_k2, kl_k3)``.

    Functions are matched to the exercise's names by name, or else in the order given. Prints
    the same report as ``python judge.py test`` and returns a JudgeResult (truthy when passed).
    """
    try:
        ex = get_exercise(exercise)
    except UsageError as exc:
        raise ValueError(str(exc)) from None
    want = ex.functions
    by_name = {getattr(f, "__name__", None): f for f in functions}
    chosen = {n: by_name[n] for n in want if n in by_name}
    rest = [f for f in functions if getattr(f, "__name__", None) not in chosen]
    for n in want:
        if n not in chosen and rest:
            chosen[n] = rest.pop(0)
    missing = [n for n in want if n not in chosen]

    def fail(msg: str) -> JudgeResult:
        res = {"exercise": ex.id, "file": "<notebook>", "status": "error", "cases": [], "passed": 0,
               "total": 0, "hints": [], "error": msg, "output": "", "sample": sample}
        if not quiet:
            print(report.format_result(res))
        return JudgeResult(ex.id, "error", 0, 0, res)

    if missing:
        return fail(f"pass the function(s) {', '.join(missing)} too: "
                    f"check({ex.id!r}, {', '.join(want)})")
    try:
        source = build_source(chosen, want)
    except SourceError as exc:
        return fail(str(exc))
    path = workspace_dir() / f".notebook_{ex.id}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    res = grade(ex, path, timeout, sample)
    if not sample:
        progress.record(ex, None, res["status"] == "passed")
    if not quiet:
        print(report.format_result(res, show_passing=False))
    return JudgeResult(ex.id, res["status"], res["passed"], res["total"], res)
