"""The judge run with a Python that lacks torch never blames the reader's code.

``python -S`` starts the course's own interpreter without its site-packages, so torch cannot be
imported: a faithful, fast stand-in for "a Python that is not the course's environment".
"""
import json
import os
import stat
import subprocess
import sys

from course_lib.judge import runner
from course_lib.judge.environment import REEXEC_FLAG, VENV_OVERRIDE
from course_lib.judge.registry import EXERCISES, ROOT

EX01 = EXERCISES["ex01_group_advantages"]


def _run(*args, venv_python, env_ws):
    env = {k: v for k, v in os.environ.items() if k not in (REEXEC_FLAG, "PYTHONPATH")}
    env[VENV_OVERRIDE] = str(venv_python)
    env["COURSE_JUDGE_WORKSPACE"] = str(env_ws)
    return subprocess.run([sys.executable, "-S", "judge.py", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=120)


def test_without_torch_and_without_the_course_python_it_says_what_to_type(tmp_path):
    proc = _run("test", "ex01", str(EX01.solution), venv_python=tmp_path / "missing", env_ws=tmp_path)
    out = " ".join((proc.stdout + proc.stderr).split())          # undo the wrapping
    assert proc.returncode == 2, out
    assert "cannot import torch" in out and "Nothing is wrong with your code" in out
    assert ".venv/bin/python judge.py test ex01 " in out and "make lab" in out
    assert "your code raised" not in out and "crash" not in out and "Score" not in out

    proc = _run("--json", "check", venv_python=tmp_path / "missing", env_ws=tmp_path)
    assert proc.returncode == 2 and json.loads(proc.stdout)["environment_error"] is True


def test_doctor_without_torch_says_the_same(tmp_path):
    proc = _run("doctor", venv_python=tmp_path / "missing", env_ws=tmp_path)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 1
    assert "torch NOT AVAILABLE" in out and "Nothing is wrong with your code" in out
    assert ".venv/bin/python judge.py doctor" in out


def test_without_torch_it_reruns_itself_with_the_course_python(tmp_path):
    proc = _run("test", "ex01", str(EX01.solution), "--sample", venv_python=sys.executable,
                env_ws=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "running the course's Python" in proc.stderr
    assert "Score: 3/3" in proc.stdout


def test_list_and_hint_need_no_torch_and_do_not_rerun(tmp_path):
    proc = _run("list", venv_python=tmp_path / "missing", env_ws=tmp_path)
    assert proc.returncode == 0 and "ex01_group_advantages" in proc.stdout
    assert "cannot import torch" not in proc.stdout + proc.stderr


def test_a_grading_process_that_cannot_import_torch_is_not_reported_as_the_readers_crash(
        tmp_path, monkeypatch):
    shim = tmp_path / "python-without-site"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sys, "executable", str(shim))
    res = runner.grade(EX01, EX01.solution, 10.0, sample=True)
    assert res["status"] == "environment", res
    assert "Nothing is wrong with your code" in " ".join(res["error"].split())
