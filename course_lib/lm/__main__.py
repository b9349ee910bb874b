"""``python -m course_lib.lm build`` (what ``make model`` runs) and ``python -m course_lib.lm info``."""
from .model import main

raise SystemExit(main())
