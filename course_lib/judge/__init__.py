"""The exercise judge: grades a reader's implementation of an exercise in a subprocess.

Command line: ``python judge.py -h`` (a thin wrapper around ``course_lib.judge.cli``).
In a notebook: ``from course_lib.judge import check; check("ex01_group_advantages", group_advantages)``.

Modules: ``registry`` (the catalogue, paths), ``cases`` (the Case record checks are made of),
``grading`` + ``worker`` (run in the subprocess; the only ones importing torch, with ``sandbox``,
``comparison`` and ``mistakes``), ``runner`` (starts the subprocess), ``report`` (text output),
``progress`` (the reader's status), ``plaintext`` (formulas for the terminal), ``notebook``, ``cli``.
"""
from .notebook import JudgeResult, check
from .registry import EXERCISES, get_exercise
from .runner import grade

__all__ = ["check", "grade", "get_exercise", "EXERCISES", "JudgeResult"]
