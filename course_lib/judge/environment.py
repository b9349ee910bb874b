"""Is this Python the course's environment? Checked before anything is graded, so that a Python
without torch is never reported as a crash of the reader's code.

When torch cannot be found, the command re-runs itself with the course's Python (``.venv/bin/python``)
if that exists (``os.execv``, once), and otherwise says exactly what to type. Imports nothing heavy.
"""
from __future__ import annotations

import importlib.util
import os
import shlex
import sys
import textwrap
from pathlib import Path

from .registry import ROOT

VENV_OVERRIDE = "COURSE_JUDGE_VENV_PYTHON"     # another course Python (tests)
REEXEC_FLAG = "COURSE_JUDGE_REEXECUTED"        # set on the re-run, so that it happens at most once
VENV_RELATIVE = ".venv/bin/python"


def course_python() -> Path:
    return Path(os.environ.get(VENV_OVERRIDE) or ROOT / VENV_RELATIVE)


def has_torch() -> bool:
    """Can this Python import torch? (find_spec only: no 1-2 s torch import in the front end)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def is_course_python() -> bool:
    """Is this interpreter the one of the course's .venv (or the COURSE_JUDGE_VENV_PYTHON one)?"""
    if os.environ.get(VENV_OVERRIDE):
        return Path(sys.executable).resolve() == Path(os.environ[VENV_OVERRIDE]).resolve()
    return Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()


def _usable(python: Path) -> bool:
    return python.is_file() and os.access(python, os.X_OK)


def wrong_python_message(argv: list[str] | None = None) -> str:
    """What to tell a reader whose Python lacks torch: not their code's fault, and what to type."""
    args = " ".join(shlex.quote(a) for a in (argv or ["test", "ex01"]))
    text = (f"This Python ({sys.executable}) cannot import torch, so the judge cannot grade anything "
            "with it. Nothing is wrong with your code. ")
    if _usable(course_python()):
        text += "Run the judge with the course's environment, from the course folder:"
    else:
        text += (f"The course's environment ({VENV_RELATIVE}) does not exist yet: create it with "
                 "`make lab` (see README.md), then run, from the course folder:")
    return textwrap.fill(text, 96) + f"\n    {VENV_RELATIVE} judge.py {args}"


def ensure_course_python(argv: list[str]) -> str | None:
    """None when this Python has torch. Otherwise re-run ``judge.py argv`` with the course's Python
    (does not return) when it exists and this is not already the re-run; else return the message."""
    if has_torch():
        return None
    python = course_python()
    if _usable(python) and os.environ.get(REEXEC_FLAG) != "1":
        print(f"judge: {sys.executable} cannot import torch; running the course's Python "
              f"({VENV_RELATIVE}) instead.", file=sys.stderr, flush=True)
        os.environ[REEXEC_FLAG] = "1"
        os.execv(str(python), [str(python), str(ROOT / "judge.py"), *argv])
    return wrong_python_message(argv)


def worker_lacked_torch(stderr: str) -> bool:
    """Did the grading subprocess die because torch could not be imported?"""
    return "No module named 'torch'" in stderr or "No module named torch" in stderr
