"""Command-line front end: ``python judge.py <verb> ...`` (run ``python judge.py -h``).

Verbs: list, start, test, hint, solution, reset, watch, doctor, check. ``--json`` anywhere prints
machine-readable output. Exit codes: 0 success (every case passed), 1 failure, 2 usage error.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from . import environment, progress, report
from .plaintext import markdown_to_terminal
from .registry import (EXERCISES, Exercise, UsageError, chapter_exists, get_exercise, parse_hints,
                       workspace_dir, workspace_file)
from .runner import DEFAULT_TIME_LIMIT, grade, run_many

EPILOG = """How to do an exercise:
  python judge.py start ex01     copy the starter to workspace/ex01_group_advantages.py, print the task
  (edit that file)               python judge.py watch ex01 re-grades on every save
  python judge.py test ex01      grade it; `hint ex01` when stuck, `solution ex01` when done
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message}\n\n{self.format_usage().strip()}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="judge.py", description="Local grader for the course's exercises.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", parser_class=_Parser)
    sub.add_parser("list", help="every exercise with its chapter, points and your status")
    s = sub.add_parser("start", help="copy the starter to workspace/<id>.py and print the task")
    s.add_argument("id")
    s = sub.add_parser("test", help="grade workspace/<id>.py, or FILE")
    s.add_argument("id")
    s.add_argument("file", nargs="?")
    s.add_argument("--sample", action="store_true", help="only the quick sample cases")
    s.add_argument("--timeout", type=float, default=DEFAULT_TIME_LIMIT,
                   help=f"seconds your code may run in total (default {DEFAULT_TIME_LIMIT:g})")
    s.add_argument("--failures-only", action="store_true", help="do not list passing cases")
    s = sub.add_parser("hint", help="the next general hint, stronger each time (or --level N of 3), "
                                    "after what your file fails first")
    s.add_argument("id")
    s.add_argument("file", nargs="?")
    s.add_argument("--level", type=int)
    s = sub.add_parser("solution", help="the reference solution with a short explanation")
    s.add_argument("id")
    s = sub.add_parser("reset", help="restore the starter; your file is kept as a numbered backup")
    s.add_argument("id")
    s = sub.add_parser("watch", help="re-grade on every save (Ctrl-C to stop)")
    s.add_argument("id")
    s.add_argument("file", nargs="?")
    s.add_argument("--timeout", type=float, default=DEFAULT_TIME_LIMIT)
    s.add_argument("--interval", type=float, default=0.5, help=argparse.SUPPRESS)
    s.add_argument("--rounds", type=int, default=0, help=argparse.SUPPRESS)
    sub.add_parser("doctor", help="Python, torch, device, and what can be graded here")
    s = sub.add_parser("check", help="course self-test: solutions pass, starters and wrong variants fail")
    s.add_argument("ids", nargs="*")
    s.add_argument("-v", "--verbose", action="store_true",
                   help="for each wrong variant: its hint and what it returns against the reference")
    return p


# ---------------------------------------------------------------- verbs

def cmd_list(args) -> tuple[int, object, str]:
    rows = [{"id": ex.id, "title": ex.title, "chapter": ex.chapter, "points": ex.points,
             "functions": list(ex.functions), "status": progress.status(ex),
             "chapter_exists": chapter_exists(ex)}
            for ex in EXERCISES.values()]
    return 0, rows, report.format_list(rows)


def cmd_start(args):
    ex = get_exercise(args.id)
    dest = workspace_file(ex)
    task = ex.readme.read_text(encoding="utf-8")
    if dest.exists():
        note = (f"{report.rel(dest)} already exists: it was left as it is (use `python judge.py "
                f"reset {ex.id.split('_')[0]}` to start over; your file is then kept as a backup).")
        created = False
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ex.starter, dest)
        note = f"Created {report.rel(dest)}: write your code there."
        created = True
    short = ex.id.split("_")[0]
    text = (f"{markdown_to_terminal(task).rstrip()}\n\n"
            f"(Formulas in plain text here; typeset in {report.rel(ex.readme)}: in JupyterLab's file "
            f"browser, right-click it, Open With, Markdown Preview.)\n\n{note}\nThen run `python judge.py test {short}` "
            f"(or `python judge.py watch {short}` to re-grade on every save).\n\nThe reference solution "
            f"({report.rel(ex.solution)}; Lab's file browser does not list it) ends the exercise: "
            f"`python judge.py solution {short}` prints it, once yours passes.")
    return 0, {"exercise": ex.id, "file": str(dest), "created": created, "task": task}, text


def _grade_cmd(ex: Exercise, file: str | None, timeout: float, sample: bool):
    if file:
        path = Path(file)
        if not path.is_file():
            raise UsageError(f"no such file: {file}")
    else:
        path = workspace_file(ex)
        if not path.exists():
            raise UsageError(f"{report.rel(path)} does not exist yet: run "
                             f"`python judge.py start {ex.id.split('_')[0]}` first")
    if timeout <= 0:
        raise UsageError(f"--timeout must be > 0, got {timeout:g}")
    res = grade(ex, path, timeout, sample)
    if not sample:
        progress.record(ex, path, res["status"] == "passed")
    return res


def cmd_test(args):
    ex = get_exercise(args.id)
    res = _grade_cmd(ex, args.file, args.timeout, args.sample)
    return (0 if res["status"] == "passed" else 1), res, \
        report.format_result(res, show_passing=not args.failures_only)


def cmd_hint(args):
    """The exercise's general hints, one level stronger per call (or --level N). Where the reader's file
    fails a case, its first failing case comes first (the case's message and what to check): `test`
    printed that already, so the hint always adds the next rung of the ladder."""
    ex = get_exercise(args.id)
    hints = ex.hint_levels()
    if not hints:
        raise UsageError(f"{ex.id} has no hints")
    short = ex.id.split("_")[0]
    path = Path(args.file) if args.file else workspace_file(ex)
    if args.file and not path.is_file():
        raise UsageError(f"no such file: {args.file}")
    if args.level is not None and not 1 <= args.level <= len(hints):
        raise UsageError(f"--level must be between 1 and {len(hints)}, got {args.level}")
    target = case = None
    head = ""
    if args.level is None and path.is_file():
        res = grade(ex, path, DEFAULT_TIME_LIMIT)
        target = report.first_failure(res)
        if target is not None:
            case = next((c["name"] for c in res["cases"] if not c["passed"]), None)
            head = (f"{ex.id} ({report.rel(path)}): {res['passed']}/{res['total']} cases pass; fix this "
                    f"one first.\n{target}\n\n")
    level = args.level if args.level is not None else progress.next_hint_level(ex, len(hints))
    if level == len(hints):
        more = f"\n\n(Hint {level} of {len(hints)}: the last one.)"
    elif args.level is not None:                   # the same command would print the same level
        more = (f"\n\n(Hint {level} of {len(hints)}. `python judge.py hint {short} --level {level + 1}` "
                "gives a stronger one.)")
    else:
        more = (f"\n\n(Hint {level} of {len(hints)}. Run the same command again for a stronger hint, or "
                f"`python judge.py hint {short} --level N` for level N.)")
    return 0, {"exercise": ex.id, "level": level, "levels": len(hints), "hint": hints[level - 1],
               "case": case, "target": target}, \
        f"{head}{ex.id}, general hint {level} of {len(hints)}:\n\n{markdown_to_terminal(hints[level - 1])}{more}"


def cmd_solution(args):
    ex = get_exercise(args.id)
    code = ex.solution.read_text(encoding="utf-8")
    explanation = ast.get_docstring(ast.parse(code)) or ""
    text = (f"{ex.id}: reference solution ({report.rel(ex.solution)})\n\n{explanation}\n\n"
            f"{'-' * 72}\n{code.rstrip()}\n{'-' * 72}")
    return 0, {"exercise": ex.id, "file": str(ex.solution), "explanation": explanation,
               "code": code}, text


def backup_path(dest: Path) -> Path:
    n = 1
    while dest.with_name(f"{dest.name}.bak{n}").exists():
        n += 1
    return dest.with_name(f"{dest.name}.bak{n}")


def cmd_reset(args):
    ex = get_exercise(args.id)
    dest = workspace_file(ex)
    backup = None
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        backup = backup_path(dest)
        shutil.copy2(dest, backup)                 # copy first: the reader's file is never at risk
        if backup.read_bytes() != dest.read_bytes():
            raise OSError(f"could not back up {dest} to {backup}; nothing was changed")
    shutil.copyfile(ex.starter, dest)
    text = f"Restored the starter in {report.rel(dest)}."
    if backup:
        text += f" Your previous file is kept as {report.rel(backup)}."
    return 0, {"exercise": ex.id, "file": str(dest), "backup": str(backup) if backup else None}, text


def cmd_watch(args, emit):
    ex = get_exercise(args.id)
    path = Path(args.file) if args.file else workspace_file(ex)
    if not path.exists():
        raise UsageError(f"{report.rel(path)} does not exist yet: run "
                         f"`python judge.py start {ex.id.split('_')[0]}` first")
    last, rounds, code = None, 0, 1
    emit(None, f"Watching {report.rel(path)}; it is re-graded on every save. Ctrl-C stops.")
    try:
        while True:
            try:
                stamp = path.stat().st_mtime_ns
            except OSError:
                stamp = None                       # an editor may replace the file while saving
            if stamp is not None and stamp != last:
                last = stamp
                res = _grade_cmd(ex, str(path), args.timeout, False)
                code = 0 if res["status"] == "passed" else 1
                emit(res, f"\n--- {time.strftime('%H:%M:%S')} ---\n"
                          + report.format_result(res, show_passing=False))
                rounds += 1
                if args.rounds and rounds >= args.rounds:
                    return code
            time.sleep(args.interval)
    except KeyboardInterrupt:
        emit(None, "\nStopped watching.")
        return code


def cmd_doctor(args):
    info = {"python": sys.version.split()[0], "executable": sys.executable,
            "platform": platform.platform(), "workspace": str(workspace_dir())}
    try:
        import torch
        info["torch"] = torch.__version__
        info["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    except Exception as exc:                       # torch missing or broken
        info["torch"] = None
        info["device"] = None
        info["torch_error"] = f"{type(exc).__name__}: {exc}"
    info["environment_problem"] = None if info["torch"] else environment.wrong_python_message(["doctor"])
    course_python = environment.course_python()
    info["course_python"] = str(course_python) if course_python.is_file() else None
    rows = []
    if info["torch"]:
        jobs = [{"exercise": ex.id, "file": str(ex.solution), "time_limit": 60, "sample": True}
                for ex in EXERCISES.values()]
        for res in run_many([jobs], EXERCISES):
            ok = res["status"] == "passed"
            rows.append({"exercise": res["exercise"], "gradable": ok,
                         "detail": "ok" if ok else (res["error"] or res["status"])})
    info["exercises"] = rows
    lines = [f"Python  {info['python']}  ({info['executable']})",
             f"torch   {info['torch'] or 'NOT AVAILABLE: ' + info.get('torch_error', '')}",
             f"device  {info['device'] or '-'} (grading always runs on the CPU)",
             f"workspace {info['workspace']}", ""]
    if info["course_python"] and info["torch"] and not environment.is_course_python():
        lines[1:1] = [f"note    this is not the course's environment; {environment.VENV_RELATIVE} is "
                      "(grading works with any Python that has torch)"]
    lines += [f"{'ok ' if r['gradable'] else 'NO '} {r['exercise']}"
              + ("" if r["gradable"] else f": {r['detail']}") for r in rows]
    if info["environment_problem"]:
        lines += [info["environment_problem"], ""]
    ok = bool(info["torch"]) and all(r["gradable"] for r in rows)
    lines.append("\nEverything can be graded here." if ok else "\nSome exercises cannot be graded here.")
    return (0 if ok else 1), info, "\n".join(lines)


def _hint_of(variant: Path) -> str | None:
    for node in ast.parse(variant.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "HINT" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def cmd_check(args):
    exs = [get_exercise(i) for i in args.ids] if args.ids else list(EXERCISES.values())
    rows, jobs_by_ex = [], {}
    for ex in exs:
        jobs = [{"exercise": ex.id, "file": str(ex.solution), "time_limit": 60, "label": "solution"},
                {"exercise": ex.id, "file": str(ex.starter), "time_limit": 60, "label": "starter"}]
        for v in ex.wrong_variants():
            jobs.append({"exercise": ex.id, "file": str(v), "time_limit": 60, "label": f"wrong/{v.name}"})
        jobs_by_ex[ex.id] = jobs
        files_ok = ex.readme.exists() and len(ex.hint_levels()) >= 3
        rows.append({"exercise": ex.id, "what": "files", "ok": files_ok,
                     "detail": "README, hints (3 levels)" if files_ok else "README.md or 3 hint levels missing"})
        if not ex.wrong_variants():
            rows.append({"exercise": ex.id, "what": "wrong variants", "ok": False, "detail": "none"})
    n = max(1, min(2, os.cpu_count() or 1))
    order = sorted(jobs_by_ex.values(), key=len, reverse=True)
    batches = [[] for _ in range(n)]
    for jobs in order:                              # balance the batches by job count
        min(batches, key=len).extend(jobs)
    results = run_many([b for b in batches if b], {e.id: e for e in exs}, workers=n)
    for res in sorted(results, key=lambda r: (r["exercise"], r["label"] != "solution", r["label"])):
        label = res["label"]
        if label == "solution":
            ok = res["status"] == "passed"
            detail = f"{res['passed']}/{res['total']} cases" if ok else _why(res)
        elif label == "starter":
            ok = res["status"] == "not_implemented"
            detail = "reports 'not implemented'" if ok else f"status {res['status']}"
        else:
            hint = _hint_of(Path(res["file"]))
            fired = hint is not None and hint in res["hints"]
            ok = res["status"] == "failed" and fired
            if ok:
                detail = f"fails {res['total'] - res['passed']}/{res['total']} cases, hint shown"
            else:
                detail = (f"status {res['status']}, {res['passed']}/{res['total']} passed, its hint "
                          f"{'shown' if fired else 'NOT shown'}{_why(res, short=True)}")
        row = {"exercise": res["exercise"], "what": label, "ok": ok, "detail": detail}
        if getattr(args, "verbose", False) and label.startswith("wrong/"):
            row["more"] = _variant_lines(res, _hint_of(Path(res["file"])))
        rows.append(row)
    rows.sort(key=lambda r: r["exercise"])
    ok = all(r["ok"] for r in rows)
    return (0 if ok else 1), {"ok": ok, "rows": rows}, report.format_check(rows)


def _variant_lines(res: dict, hint: str | None, n_cases: int = 3) -> list[str]:
    """What a known-wrong variant returns on its first failing cases, next to its hint, so that
    a reader of `check -v` can see whether the hint describes what the variant does."""
    lines = [f"hint: {hint}"]
    bad = [c for c in res["cases"] if not c["passed"]]
    for c in bad[:n_cases]:
        lines.append(f"{c['name']}: {c['message'].splitlines()[0] if c['message'] else ''}")
        if c.get("ratio"):
            lines.append(f"    {c['ratio']}")
    if len(bad) > n_cases:
        lines.append(f"... and {len(bad) - n_cases} more failing cases")
    return lines


def _why(res: dict, short: bool = False) -> str:
    if res.get("error"):
        return ("; " if short else "") + res["error"].splitlines()[-1]
    bad = [c for c in res["cases"] if not c["passed"]]
    if not bad:
        return ""
    first = bad[0]
    return ("; " if short else "") + f"{first['name']}: {first['message'].splitlines()[0]}"


# ---------------------------------------------------------------- entry point

NEEDS_TORCH = ("test", "watch", "check", "doctor")      # the others answer without torch


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    raw_argv = list(argv)
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]

    def emit(obj, text):
        if as_json:
            if obj is not None:
                print(json.dumps(obj, indent=1), flush=True)
        else:
            print(text, flush=True)

    try:
        args = build_parser().parse_args(argv)
        verb = args.verb or "list"
        if verb in NEEDS_TORCH:
            problem = environment.ensure_course_python(raw_argv)
            if problem and verb != "doctor":
                if as_json:
                    print(json.dumps({"error": problem, "environment_error": True}), flush=True)
                else:
                    print(f"judge: {problem}", file=sys.stderr)
                return 2
        if verb == "watch":
            return cmd_watch(args, emit)
        fn = {"list": cmd_list, "start": cmd_start, "test": cmd_test, "hint": cmd_hint,
              "solution": cmd_solution, "reset": cmd_reset, "doctor": cmd_doctor,
              "check": cmd_check}[verb]
        code, obj, text = fn(args)
        emit(obj, text)
        return code
    except UsageError as exc:
        if as_json:
            print(json.dumps({"error": str(exc), "usage_error": True}), flush=True)
        else:
            print(f"judge: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\njudge: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:                       # output piped into `head`, which stopped reading
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except SystemExit as exc:                     # -h / --help
        return int(exc.code or 0) if isinstance(exc.code, int) else 0
    except Exception as exc:                      # never show the reader our own traceback
        if os.environ.get("COURSE_JUDGE_DEBUG"):
            raise
        msg = f"internal error ({type(exc).__name__}: {exc}). This is a bug in the judge, not in " \
              "your code; set COURSE_JUDGE_DEBUG=1 to see the details."
        if as_json:
            print(json.dumps({"error": msg, "internal_error": True}), flush=True)
        else:
            print(f"judge: {msg}", file=sys.stderr)
        return 1
