"""The exercise catalogue and where things live. Imports nothing heavy (no torch), so that
``judge.py list`` and ``hint`` answer instantly."""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]          # repository root (holds exercises/, judge.py)
EXERCISES_DIR = ROOT / "exercises"


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    chapter: str
    points: int
    functions: tuple[str, ...]
    part: str                                   # the part of the loss it practises (chapter 00's map)
    uses: tuple[str, ...] = ()                  # chapters that use it without owning it (NN)

    @property
    def dir(self) -> Path:
        return EXERCISES_DIR / self.id

    @property
    def starter(self) -> Path:
        return self.dir / "starter.py"

    @property
    def solution(self) -> Path:
        return self.dir / "solution.py"

    @property
    def readme(self) -> Path:
        return self.dir / "README.md"

    @property
    def hints(self) -> Path:
        return self.dir / "hints.md"

    def hint_levels(self) -> list[str]:
        """The general hints of hints.md, gentlest first ("## Level N" sections)."""
        return parse_hints(self.hints.read_text(encoding="utf-8")) if self.hints.is_file() else []

    def wrong_variants(self) -> list[Path]:
        d = self.dir / "wrong"
        return sorted(d.glob("*.py")) if d.is_dir() else []


_CATALOGUE = [
    # id, title, chapter that teaches it, points, functions, part of the loss, chapters that use it
    ("ex01_group_advantages", "GRPO and Dr. GRPO group advantages", "02_group_advantages", 2,
     ("group_advantages",), "advantage", ("07",)),
    ("ex02_rloo", "RLOO leave-one-out advantages", "02_group_advantages", 1, ("rloo_advantages",),
     "advantage"),
    ("ex03_aggregation", "The four loss-aggregation modes", "03_loss_aggregation", 2, ("aggregate",),
     "aggregation", ("07", "09")),
    ("ex04_kl_estimators", "KL estimators k1, k2, k3", "04_kl_estimators", 2,
     ("kl_k1", "kl_k2", "kl_k3"), "KL penalty"),
    ("ex05_ppo_clip", "PPO clipped surrogate loss", "01_ppo_clip_and_gae", 2, ("ppo_clip_loss",),
     "ratio and clip", ("05", "07", "09")),
    ("ex06_gspo", "GSPO sequence-level ratio", "05_ratios_and_clipping", 3, ("gspo_loss",),
     "ratio and clip", ("07", "09")),
    ("ex07_cispo", "CISPO clipped IS-weight loss", "05_ratios_and_clipping", 2, ("cispo_loss",),
     "ratio and clip", ("07", "09")),
    ("ex08_sapo", "SAPO soft gate", "05_ratios_and_clipping", 2, ("sapo_loss",), "ratio and clip",
     ("07", "09")),
    ("ex09_tis_mis", "TIS and MIS correction weights", "06_train_inference_mismatch", 2,
     ("tis_weights", "mis_weights"), "mismatch weight", ("07", "09")),
    ("ex10_gae", "Generalised advantage estimation", "01_ppo_clip_and_gae", 3, ("gae",), "advantage"),
    ("ex11_overlong_penalty", "DAPO soft overlong punishment", "03_loss_aggregation", 1,
     ("overlong_penalty",), "aggregation", ("07",)),
    ("ex12_adaptive_kl", "Adaptive KL controller", "04_kl_estimators", 1, ("adaptive_kl_update",),
     "KL penalty"),
    ("ex13_diagnose_runs", "Diagnose a run from its curves", "08_reading_training_curves", 3,
     ("diagnose",), "all of it, trained"),
    ("ex14_dppo_trust_region", "DPPO trust region on the probability", "05_ratios_and_clipping", 2,
     ("dppo_tv_loss",), "ratio and clip"),
    ("ex15_reinforce_pp", "REINFORCE++ returns and batch whitening", "02_group_advantages", 2,
     ("reinforce_pp_advantages",), "advantage"),
    ("ex16_split_token_mean", "Token-mean over micro-batches and ranks", "10_splitting_the_batch", 2,
     ("micro_batch_loss",), "aggregation"),
    ("ex17_pass_at_k", "The unbiased pass@k estimator", "11_long_answers", 1, ("pass_at_k",),
     "all of it, trained"),
    ("ex18_chat_logprobs", "Log-probs of a chat batch", "12_real_model_tokens", 2, ("completion_logprobs",),
     "ratio and clip"),
]

EXERCISES: dict[str, Exercise] = {row[0]: Exercise(*row) for row in _CATALOGUE}


def parse_hints(text: str) -> list[str]:
    parts = re.split(r"^##\s*Level\s*\d+[^\n]*\n", text, flags=re.M)
    return [p.strip() for p in parts[1:] if p.strip()]


class UsageError(Exception):
    """A mistake in how the judge was called (exit code 2)."""


def get_exercise(name: str) -> Exercise:
    """Look up an exercise by id, or by an unambiguous prefix such as ``ex01``."""
    name = name.strip().rstrip("/").split("/")[-1]
    if name in EXERCISES:
        return EXERCISES[name]
    matches = [e for e in EXERCISES if e.startswith(name)] if name else []
    if len(matches) == 1:
        return EXERCISES[matches[0]]
    close = matches or difflib.get_close_matches(name, list(EXERCISES), n=3, cutoff=0.4)
    tip = f" Did you mean: {', '.join(close)}?" if close else " Run `python judge.py list`."
    raise UsageError(f"no exercise called {name!r}.{tip}")


def notebooks_dir() -> Path:
    """Where the chapters live. COURSE_JUDGE_NOTEBOOKS overrides it (tests)."""
    return Path(os.environ.get("COURSE_JUDGE_NOTEBOOKS", ROOT / "notebooks"))


def chapter_exists(ex: Exercise) -> bool:
    """Is the exercise's chapter in notebooks/? Checked at run time, so chapters added later count."""
    return (notebooks_dir() / f"{ex.chapter}.ipynb").is_file()


def workspace_dir() -> Path:
    """Where the reader's files live (git-ignored). COURSE_JUDGE_WORKSPACE overrides it (tests)."""
    return Path(os.environ.get("COURSE_JUDGE_WORKSPACE", ROOT / "workspace"))


def workspace_file(ex: Exercise) -> Path:
    return workspace_dir() / f"{ex.id}.py"
