"""The grading subprocess: ``python -m course_lib.judge.worker JOBS.json RESULTS.json``.

JOBS.json holds {"jobs": [{"exercise", "file", "time_limit", "sample"}, ...]}. Results are
written after every job, so that a job which kills the process loses only its own result.
"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    jobs_path, out_path = Path(argv[0]), Path(argv[1])
    jobs = json.loads(jobs_path.read_text())["jobs"]
    import torch  # noqa: F401  (imported once, before any time budget starts)

    from ..lm import ModelNotBuilt
    from .grading import ExerciseKit, grade_file
    from .registry import get_exercise

    kits: dict[str, ExerciseKit] = {}
    results = []
    for job in jobs:
        try:
            ex = get_exercise(job["exercise"])
            if ex.id not in kits:
                kits[ex.id] = ExerciseKit(ex)
            res = grade_file(kits[ex.id], Path(job["file"]), float(job["time_limit"]),
                             bool(job.get("sample", False)))
        except ModelNotBuilt as exc:                    # the setup is incomplete: say what builds it
            res = {"exercise": job["exercise"], "file": job["file"], "status": "environment",
                   "cases": [], "passed": 0, "total": 0, "hints": [], "output": "",
                   "sample": bool(job.get("sample", False)), "error": str(exc)}
        except BaseException as exc:                    # a bug of ours, never the reader's
            res = {"exercise": job["exercise"], "file": job["file"], "status": "internal_error",
                   "cases": [], "passed": 0, "total": 0, "hints": [], "output": "",
                   "sample": bool(job.get("sample", False)),
                   "error": "".join(traceback.format_exception_only(type(exc), exc)).strip(),
                   "internal_traceback": traceback.format_exc(limit=-4)}
        res["label"] = job.get("label")
        results.append(res)
        tmp = out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(results))
        tmp.replace(out_path)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
