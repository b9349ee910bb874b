"""The reader's progress, kept next to their files in workspace/.judge_progress.json."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .registry import Exercise, workspace_dir, workspace_file


def _path() -> Path:
    return workspace_dir() / ".judge_progress.json"


def load() -> dict:
    try:
        data = json.loads(_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save(data: dict) -> None:
    try:
        _path().parent.mkdir(parents=True, exist_ok=True)
        tmp = _path().with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(_path())
    except OSError:
        pass                                     # progress is a convenience, never an error


def file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def record(ex: Exercise, path: Path | None, passed: bool) -> None:
    """Remember a pass of the workspace file (by content hash) or of a notebook function."""
    if path is not None and Path(path).resolve() != workspace_file(ex).resolve():
        return                                   # grading some other file changes no status
    data = load()
    entry = data.setdefault(ex.id, {})
    if path is None:
        entry["notebook_passed"] = bool(passed) or entry.get("notebook_passed", False)
    else:
        entry["passed_hash"] = file_hash(path) if passed else None
    save(data)


def status(ex: Exercise) -> str:
    entry = load().get(ex.id, {})
    ws = workspace_file(ex)
    if ws.exists() and entry.get("passed_hash") and entry["passed_hash"] == file_hash(ws):
        return "passed"
    if entry.get("notebook_passed"):
        return "passed"
    return "in progress" if ws.exists() else "not started"


def next_hint_level(ex: Exercise, n_levels: int) -> int:
    data = load()
    entry = data.setdefault(ex.id, {})
    level = min(int(entry.get("hint_level", 0)) + 1, n_levels)
    entry["hint_level"] = level
    save(data)
    return level
