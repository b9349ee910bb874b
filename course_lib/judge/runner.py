"""Parent side of grading: check the file, start the worker subprocess, collect its results.

Uses the same interpreter as the caller (sys.executable). A job whose result never arrives
(the process was killed, hung in C code, or called os._exit) gets a clear status of its own.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .environment import worker_lacked_torch, wrong_python_message
from .registry import ROOT, Exercise

DEFAULT_TIME_LIMIT = float(os.environ.get("COURSE_JUDGE_TIMEOUT", "10"))
STARTUP_GRACE = 120.0          # seconds allowed for starting Python and importing torch


def _empty(ex: Exercise, path: Path, status: str, error: str, sample: bool = False) -> dict:
    return {"exercise": ex.id, "file": str(path), "status": status, "cases": [], "passed": 0,
            "total": 0, "hints": [], "error": error, "output": "", "sample": sample}


def precheck(ex: Exercise, path: Path, sample: bool = False) -> dict | None:
    """Problems found without running anything: unreadable file, syntax error."""
    from .messages import syntax_error_message
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return _empty(ex, path, "error", f"{path} is not a UTF-8 text file", sample)
    except OSError as exc:
        return _empty(ex, path, "error", f"cannot read {path}: {exc.strerror or exc}", sample)
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        return _empty(ex, path, "syntax_error", syntax_error_message(exc), sample)
    except ValueError as exc:                    # e.g. null bytes
        return _empty(ex, path, "syntax_error", f"cannot compile {path}: {exc}", sample)
    return None


def run_jobs(jobs: list[dict], exercises: dict[str, Exercise]) -> list[dict]:
    """Run jobs (dicts with exercise, file, time_limit, sample, label) in one subprocess."""
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="judge-") as tmp:
        jobs_path, out_path = Path(tmp) / "jobs.json", Path(tmp) / "results.json"
        jobs_path.write_text(json.dumps({"jobs": jobs}))
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.setdefault("OMP_NUM_THREADS", "1")
        limit = STARTUP_GRACE + sum(float(j["time_limit"]) + 5.0 for j in jobs)
        timed_out, stderr, rc = False, "", None
        try:
            proc = subprocess.run([sys.executable, "-m", "course_lib.judge.worker", str(jobs_path),
                                   str(out_path)], cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, errors="replace", timeout=limit)
            stderr, rc = proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            timed_out = True
            stderr = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        if out_path.exists():
            try:
                results = json.loads(out_path.read_text())
            except ValueError:
                results = []
    for job in jobs[len(results):]:
        ex = exercises[job["exercise"]]
        path = Path(job["file"])
        if not timed_out and worker_lacked_torch(stderr):
            res = _empty(ex, path, "environment", wrong_python_message(), job.get("sample", False))
        elif timed_out:
            res = _empty(ex, path, "timeout",
                         f"time limit exceeded: the grader was stopped after {limit:.0f} s "
                         "(your code may be stuck in a long computation)", job.get("sample", False))
        else:
            tail = "\n".join(stderr.strip().splitlines()[-5:])
            res = _empty(ex, path, "crashed",
                         f"the grading process stopped unexpectedly (exit code {rc}) while running "
                         "your code, before it could report (os._exit, a crash in native code, or "
                         "running out of memory?)" + (f"\n{tail}" if tail else ""),
                         job.get("sample", False))
        res["label"] = job.get("label")
        results.append(res)
        timed_out = False                        # only the first missing job ran into the limit
    return results


def grade(ex: Exercise, path: Path, time_limit: float = DEFAULT_TIME_LIMIT,
          sample: bool = False) -> dict:
    """Grade one file for one exercise (syntax check here, everything else in a subprocess)."""
    path = Path(path).resolve()
    early = precheck(ex, path, sample)
    if early is not None:
        return early
    job = {"exercise": ex.id, "file": str(path), "time_limit": time_limit, "sample": sample}
    return run_jobs([job], {ex.id: ex})[0]


def run_many(batches: list[list[dict]], exercises: dict[str, Exercise],
             workers: int | None = None) -> list[dict]:
    """Several batches of jobs in parallel subprocesses (one torch import per batch)."""
    workers = workers or max(1, min(len(batches), os.cpu_count() or 1, 4))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        out = list(pool.map(lambda b: run_jobs(b, exercises), batches))
    return [r for batch in out for r in batch]
