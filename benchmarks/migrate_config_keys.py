"""Migrate the stored runs' config records to ``rl.config.RunConfig``'s field names (December 2026).

Why: the config field ``n_heldout`` counted held-out prompts for the toy's tasks and held-out pairs for the chat
task; it is now ``heldout_questions`` (the toy's tasks) and ``heldout_pairs`` (``chat_addition``). And a run now
stores only the fields that apply to it (``RunConfig.stored_fields``): a real-model run keeps none of the toy
policy's fields (its size and warm start), which it never read.

What it changes, and nothing else:
- a toy run's record: the key ``"n_heldout"`` becomes ``"heldout_questions"``, as text, so every other byte of
  the file (each stored number) stays as it is;
- a real-model run's record (``"policy": "smollm2"``): ``n_heldout`` becomes ``heldout_pairs`` and the toy
  policy's fields go; the file is written back in its own layout (``json.dump`` with indent 1).
Every run's rows are untouched. Running it again changes nothing.

    .venv/bin/python benchmarks/migrate_config_keys.py          # the stored files under notebooks/ and course_lib/
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "notebooks" / "data", ROOT / "course_lib" / "judge" / "data")
TOY_POLICY_FIELDS = ("n_layer", "d_model", "n_head", "warm_steps", "warm_target", "warm_batch", "warm_lr",
                     "warm_noise", "warm_seed")


def _records(x):
    """Every config record (a dict with the key ``n_heldout``) inside a loaded JSON value."""
    if isinstance(x, dict):
        if "n_heldout" in x:
            yield x
        for v in x.values():
            yield from _records(v)
    elif isinstance(x, list):
        for v in x:
            yield from _records(v)


def migrate_real(record: dict) -> None:
    """In place, keeping the record's order of keys."""
    items = [("heldout_pairs" if k == "n_heldout" else k, v) for k, v in record.items() if k not in TOY_POLICY_FIELDS]
    record.clear()
    record.update(items)


def migrate_file(path: Path) -> str | None:
    """Migrate one file in place -> what changed, or None."""
    text = path.read_text()
    if '"n_heldout"' not in text:
        return None
    data = json.loads(text)
    records = list(_records(data))
    real = [r for r in records if r.get("policy") == "smollm2"]
    if real and len(real) != len(records):
        raise ValueError(f"{path}: mixes real-model and toy records; migrate it by hand")
    if real:
        for r in real:
            migrate_real(r)
        path.write_text(json.dumps(data, indent=1) + ("\n" if text.endswith("\n") else ""))
        return f"{len(real)} real-model records: heldout_pairs, the toy policy's fields dropped"
    n = text.count('"n_heldout":')
    if n != len(records):
        raise ValueError(f"{path}: 'n_heldout' outside the {len(records)} config records; migrate it by hand")
    path.write_text(text.replace('"n_heldout":', '"heldout_questions":'))
    return f"{n} toy records: heldout_questions"


def main() -> int:
    for folder in FOLDERS:
        for path in sorted(folder.rglob("*.json")):
            done = migrate_file(path)
            if done:
                print(f"{path.relative_to(ROOT)}: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
