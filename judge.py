#!/usr/bin/env python3
"""The course's exercise judge. Run `python judge.py -h`; the logic lives in course_lib/judge/."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from course_lib.judge.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
