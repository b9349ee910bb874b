"""The judge's tolerances, pinned from both sides.

- A correct solution written differently (computing in float64 and returning float32, or looping
  in plain Python) passes every exercise: exactness is demanded only where it is the lesson.
- A near miss fails: a value off by 1e-3 (relative and absolute) fails every case; a gradient off
  by a factor 1 + 5e-5 or 1.01 (values exact) fails every case that grades a gradient.
Loosening the judge's tolerances a hundredfold makes the near-miss tests fail.
"""
import textwrap
from pathlib import Path

import pytest

from course_lib.judge.grading import ExerciseKit
from course_lib.judge.registry import EXERCISES
from course_lib.judge.runner import run_jobs

WRAPPER = """
import importlib.util
import torch

_spec = importlib.util.spec_from_file_location("_reference", {solution!r})
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def _map(fn, x):
    if isinstance(x, (tuple, list)):
        return type(x)(_map(fn, v) for v in x)
    return fn(x)

{body}
"""

FLOAT64 = """
def _wrap(f):
    def call(*args, **kwargs):
        was32 = any(isinstance(a, torch.Tensor) and a.dtype == torch.float32
                    for a in list(args) + list(kwargs.values()))
        up = lambda a: a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        out = f(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
        down = lambda t: t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
        return _map(down, out) if was32 else out
    return call
"""

NEAR_VALUE = """
def _nudge(t):                         # 1e-3 off, relatively and absolutely: 1e-3 * (|t| + 1)
    if isinstance(t, torch.Tensor) and t.is_floating_point():
        return t + 1e-3 * (t.abs() + 1)
    if isinstance(t, float):
        return t + 1e-3 * (abs(t) + 1)
    return t


def _wrap(f):
    return lambda *a, **k: _map(_nudge, f(*a, **k))
"""

NEAR_GRAD = """
def _scale_grad(t):                    # same value, gradient times FACTOR
    if isinstance(t, torch.Tensor) and t.requires_grad:
        return t + (FACTOR - 1) * (t - t.detach())
    return t


def _wrap(f):
    return lambda *a, **k: _map(_scale_grad, f(*a, **k))
"""


def _file(tmp_path: Path, ex, kind: str, head: str, factor: float = 1.0) -> Path:
    body = head.replace("FACTOR", repr(factor)) + "\n" + "\n".join(
        f"{name} = _wrap(_ref.{name})" for name in ex.functions)
    p = tmp_path / f"{ex.id}_{kind}.py"
    p.write_text(WRAPPER.format(solution=str(ex.solution), body=textwrap.dedent(body)))
    return p


def _grade_all(paths: dict) -> dict:
    jobs = [{"exercise": ex_id, "file": str(p), "time_limit": 60, "sample": False}
            for ex_id, p in paths.items()]
    return {r["exercise"]: r for r in run_jobs(jobs, EXERCISES)}


def _failures(res) -> str:
    bad = [f"{c['name']}: {c['message']}" for c in res["cases"] if not c["passed"]]
    return res["error"] or "\n".join(bad)


FLOAT64_OUT = """
def _wrap(f):                          # the same computation, every floating result left in float64
    def call(*args, **kwargs):
        up = lambda a: a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        return f(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
    return call
"""


def test_a_correct_solution_returning_float64_for_float32_inputs_passes_with_a_note(tmp_path):
    """The lesson is the formula, not the dtype: a float64 result is compared at the tolerance of the
    inputs' dtype and the reader is told about the dtype in a note, not a failure."""
    results = _grade_all({e.id: _file(tmp_path, e, "f64out", FLOAT64_OUT) for e in EXERCISES.values()})
    bad = {ex_id: _failures(res) for ex_id, res in results.items() if res["status"] != "passed"}
    assert not bad, "\n".join(f"{k}:\n{v}" for k, v in bad.items())
    noted = [ex_id for ex_id, res in results.items()
             if any("your result is torch.float64 where the reference returns torch.float32" in n
                    for n in res["notes"])]
    assert {"ex15_reinforce_pp", "ex16_split_token_mean", "ex14_dppo_trust_region"} <= set(noted), noted


def test_a_correct_solution_computing_in_float64_and_returning_float32_passes_everything(tmp_path):
    results = _grade_all({e.id: _file(tmp_path, e, "f64", FLOAT64) for e in EXERCISES.values()})
    bad = {ex_id: _failures(res) for ex_id, res in results.items() if res["status"] != "passed"}
    assert not bad, "\n".join(f"{k}:\n{v}" for k, v in bad.items())


# Loop-based solutions, written the way a reader who thinks in Python numbers might.
LOOPS = {
    "ex01_group_advantages": """
        import math
        import torch

        def group_advantages(rewards, group_size, scale=True, eps=1e-6):
            out = []
            values = [float(r) for r in rewards]
            for start in range(0, len(values), group_size):
                group = values[start:start + group_size]
                mean = math.fsum(group) / len(group)
                std = math.sqrt(math.fsum((r - mean) ** 2 for r in group) / (len(group) - 1))
                for r in group:
                    if all(x == group[0] for x in group):
                        out.append(0.0)
                    else:
                        out.append((r - mean) / (std + eps) if scale else r - mean)
            return torch.tensor(out, dtype=torch.float32)
        """,
    "ex02_rloo": """
        import torch

        def rloo_advantages(rewards, group_size):
            values = [float(r) for r in rewards]
            out = []
            for start in range(0, len(values), group_size):
                group = values[start:start + group_size]
                for i, r in enumerate(group):
                    others = [x for j, x in enumerate(group) if j != i]
                    out.append(r - sum(others) / len(others))
            return torch.tensor(out, dtype=torch.float32)
        """,
    "ex03_aggregation": """
        import torch

        def aggregate(loss_tok, mask, mode, max_len=None):
            B, T = loss_tok.shape
            rows, total, n_tok = [], loss_tok.new_zeros(()), 0
            for b in range(B):
                row = loss_tok.new_zeros(())
                n = 0
                for t in range(T):
                    if mask[b, t]:
                        row = row + loss_tok[b, t]
                        n += 1
                total, n_tok = total + row, n_tok + n
                if n:
                    if mode == "seq-mean-token-mean":
                        rows.append(row / n)
                    elif mode == "seq-mean-token-sum":
                        rows.append(row)
                    else:
                        rows.append(row / (max_len if max_len is not None else T))
            if mode == "token-mean":
                return total / max(n_tok, 1)
            if not rows:
                return loss_tok.new_zeros(())
            return sum(rows) / len(rows)
        """,
    "ex11_overlong_penalty": """
        import torch

        def overlong_penalty(lengths, max_len, cache_len):
            out = []
            for n in lengths.tolist():
                start = max_len - cache_len
                if n <= start:
                    out.append(0.0)
                elif n <= max_len:
                    out.append((start - n) / cache_len)
                else:
                    out.append(-1.0)
            return torch.tensor(out, dtype=torch.float32)
        """,
}


def test_loop_based_correct_solutions_pass(tmp_path):
    paths = {}
    for ex_id, src in LOOPS.items():
        paths[ex_id] = tmp_path / f"{ex_id}_loops.py"
        paths[ex_id].write_text(textwrap.dedent(src))
    bad = {ex_id: _failures(res) for ex_id, res in _grade_all(paths).items()
           if res["status"] != "passed"}
    assert not bad, "\n".join(f"{k}:\n{v}" for k, v in bad.items())


def test_a_value_off_by_1e_3_fails_every_case_of_every_exercise(tmp_path):
    # exercises graded by a score over labels (ex13) have no values to be near
    numeric = [e for e in EXERCISES.values() if any(c.score is None for c in ExerciseKit(e).cases)]
    assert len(numeric) >= len(EXERCISES) - 1
    results = _grade_all({e.id: _file(tmp_path, e, "near_value", NEAR_VALUE) for e in numeric})
    passing = {ex_id: [c["name"] for c in res["cases"] if c["passed"]]
               for ex_id, res in results.items()}
    assert all(res["total"] > 0 for res in results.values())
    assert not any(passing.values()), f"a near miss passes: {passing}"


GRAD_CASES = {}
for _ex in EXERCISES.values():
    _kit = ExerciseKit(_ex)
    GRAD_CASES[_ex.id] = [c.name for i, c in enumerate(_kit.cases)
                          if _kit.reference_outcome(i).grad is not None]


@pytest.mark.parametrize("factor", [1 + 5e-5, 1.01])
def test_a_gradient_off_by_a_small_factor_fails_every_gradient_case(tmp_path, factor):
    with_grad = [e for e in EXERCISES.values() if GRAD_CASES[e.id]]
    assert len(with_grad) >= 6
    results = _grade_all({e.id: _file(tmp_path, e, "near_grad", NEAR_GRAD, factor)
                          for e in with_grad})
    for ex_id, res in results.items():
        by_name = {}
        for c in res["cases"]:
            by_name.setdefault(c["name"], []).append(c)
        for name in GRAD_CASES[ex_id]:
            for c in by_name[name]:
                assert not c["passed"], f"{ex_id}: gradient x {factor} passes {name!r}"
                assert "gradient" in c["message"], c["message"]
