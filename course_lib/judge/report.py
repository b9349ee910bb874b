"""Turning result dicts into text for people (the --json flag prints the dicts instead)."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

from .registry import EXERCISES

MAX_FAILURES_SHOWN = 8


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _indent(text: str, n: int) -> str:
    return textwrap.indent(text, " " * n)


def format_result(res: dict, show_passing: bool = True) -> str:
    lines = [f"{res['exercise']}  ({_rel(res['file'])})"]
    status = res["status"]
    if status in ("syntax_error", "error", "crashed", "internal_error", "environment") and not res["cases"]:
        if status == "internal_error":
            lines.append("  The judge itself failed on this exercise (a bug in the course, not in your"
                         " code; please report it):")
        lines.append(_indent(res["error"] or "", 2))
        lines += _output(res)
        lines.append(_score_line(res))
        return "\n".join(lines)
    if status == "not_implemented":
        lines.append(f"  {len(res['cases'])} cases not run: the function still raises NotImplementedError.")
        lines += _output(res)
        lines.append(_score_line(res))
        return "\n".join(lines)
    shown, hinted, noted = 0, [], []
    for c in res["cases"]:
        if c["passed"]:
            if show_passing:
                lines.append(f"  PASS  {c['name']}")
                if c.get("note") and c["note"] not in noted:
                    noted.append(c["note"])
                    lines.append(textwrap.fill(c["note"], 100, initial_indent=" " * 8,
                                               subsequent_indent=" " * 8))
            continue
        shown += 1
        if shown > MAX_FAILURES_SHOWN:
            continue
        lines.append(f"  FAIL  {c['name']}")
        if c["message"]:
            lines.append(_indent(c["message"], 8))
        if c.get("hint") and c["hint"] not in hinted:
            hinted.append(c["hint"])
            lines.append(textwrap.fill("hint: " + c["hint"], 100, initial_indent=" " * 8,
                                       subsequent_indent=" " * 14))
        elif c.get("hint"):                       # the same mistake again: point at its hint
            lines.append(f"        hint: the one above ({c['hint'][:40].rstrip()} ...)")
    if shown > MAX_FAILURES_SHOWN:
        lines.append(f"  ... and {shown - MAX_FAILURES_SHOWN} more failing cases")
    if res["error"]:
        lines.append(_indent(res["error"], 2))
    lines += _output(res)
    lines += [textwrap.fill("note: " + n, 100, initial_indent="  ", subsequent_indent=" " * 8)
              for n in res.get("notes") or [] if n not in noted]
    unseen = [h for h in res.get("hints") or [] if h not in hinted]
    if unseen and status == "failed":
        lines.append("  This looks like a known mistake:")
        lines += [textwrap.fill("- " + h, 100, initial_indent=" " * 4, subsequent_indent=" " * 6)
                  for h in unseen]
    lines.append(_score_line(res))
    return "\n".join(lines)


def first_failure(res: dict) -> str | None:
    """What to fix first in a graded file: the first failing case with its message and hint, or the
    error that stops the file from running; None when nothing fails (or nothing is written yet)."""
    if res["status"] in ("passed", "not_implemented"):
        return None
    failing = [c for c in res["cases"] if not c["passed"]]
    if not failing:
        return None if not res["error"] else "  Your file does not run yet:\n" + _indent(res["error"], 4)
    c = failing[0]
    lines = [f"  Your file first fails on: {c['name']}"]
    if c["message"]:
        lines.append(_indent(c["message"], 8))
    hints = [c["hint"]] if c.get("hint") else list(res.get("hints") or [])[:1]
    lines += [textwrap.fill("hint: " + h, 100, initial_indent=" " * 8, subsequent_indent=" " * 14)
              for h in hints]
    if len(failing) > 1:
        lines.append(f"  ({len(failing) - 1} more failing case{'s' if len(failing) > 2 else ''} after it)")
    return "\n".join(lines)


def _output(res: dict) -> list[str]:
    out = (res.get("output") or "").rstrip()
    if not out:
        return []
    body = [line if len(line) <= 160 else line[:160] + " ..." for line in out.splitlines()]
    if len(body) > 20:
        body = body[:20] + [f"... ({len(body) - 20} more lines)"]
    return ["  Your code printed:"] + [_indent(line, 4) for line in body]


def _score_line(res: dict) -> str:
    status, n, total = res["status"], res["passed"], res["total"]
    ex = res["exercise"].split("_")[0]
    if status == "passed":
        if res.get("sample"):
            return (f"Score: {n}/{total}. Sample cases passed; run without --sample for the full "
                    "set of checks.")
        return f"Score: {n}/{total}. All cases passed."
    if status == "not_implemented":
        return (f"Score: 0/{total}. Not implemented yet: the function still raises "
                f"NotImplementedError. Read the task with `python judge.py start {ex}`.")
    if status == "syntax_error":
        return "Score: 0. Fix the syntax error and run again."
    if status == "timeout":
        return f"Score: {n}/{total}. Stopped: time limit exceeded."
    if status == "environment":
        return "Not graded: the course's environment is not complete (see above)."
    if status in ("error", "crashed", "internal_error"):
        return f"Score: {n}/{total}." if total else "Score: 0."
    levels = len(EXERCISES[res["exercise"]].hint_levels()) if res["exercise"] in EXERCISES else 0
    ladder = (f" ({levels} levels, from what to check to the details: one more per call, or `--level 1` "
              f"to `--level {levels}`)") if levels else ""
    return (f"Score: {n}/{total}. Not yet: fix the first failure above, or ask for a hint with "
            f"`python judge.py hint {ex}`{ladder}.")


def next_exercise(rows: list[dict]) -> dict | None:
    """The exercise to suggest: not passed yet, one whose chapter is there first, in chapter order."""
    todo = [r for r in rows if r["status"] != "passed"]
    return min(todo, key=lambda r: (not r.get("chapter_exists", True), r["chapter"], r["id"]),
               default=None)


def format_list(rows: list[dict]) -> str:
    w = max(len(r["id"]) for r in rows)
    cw = max(len(r["chapter"]) for r in rows) + 2
    lines = [f"{'exercise'.ljust(w)}  {'chapter'.ljust(cw)} pts  status"]
    for r in rows:
        chapter = r["chapter"] + ("" if r.get("chapter_exists", True) else " *")
        lines.append(f"{r['id'].ljust(w)}  {chapter.ljust(cw)} {r['points']:>3}  {r['status']}")
    if not all(r.get("chapter_exists", True) for r in rows):
        lines.append("* this chapter's notebook is not in notebooks/: the exercise (README, hints, "
                     "checks) can be done\n  on its own.")
    done = sum(r["points"] for r in rows if r["status"] == "passed")
    nxt = next_exercise(rows)
    tip = (f"Next: `python judge.py start {nxt['id'].split('_')[0]}` ({nxt['title']})."
           if nxt else "Every exercise has passed.")
    lines.append(f"\nPoints: {done}/{sum(r['points'] for r in rows)}. {tip}")
    return "\n".join(lines)


def format_check(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        mark = "ok  " if r["ok"] else "FAIL"
        lines.append(f"{mark} {r['exercise']:24s} {r['what']:32s} {r['detail']}")
        for more in r.get("more") or []:
            lines += textwrap.wrap(more, 100, initial_indent=" " * 9, subsequent_indent=" " * 13)
    bad = sum(not r["ok"] for r in rows)
    lines.append(f"\n{len(rows) - bad}/{len(rows)} checks of the exercises themselves passed."
                 if bad else f"\nAll {len(rows)} checks passed: every reference solution passes, "
                 "every starter fails, every known-wrong variant fails with its hint.")
    return "\n".join(lines)


def rel(path: Path | str) -> str:
    return _rel(str(path))
