"""GRPO and its descendants on the real model, where they differ: the course's trainer trains SmolLM2-135M-Instruct
on chapter 13's task with each batch learned in several optimiser steps, once per arm and seed, and measures
each run on the held-out questions as ``real_lm_grpo.py`` does.

    .venv/bin/python benchmarks/real_lm_lineage.py                     # every missing run -> notebooks/data/real_lm_lineage.json
    .venv/bin/python benchmarks/real_lm_lineage.py --runs gspo/0       # one run
    .venv/bin/python benchmarks/real_lm_lineage.py --list              # the plan, and what is stored
    .venv/bin/python benchmarks/real_lm_lineage.py --pilot             # the pilot -> real_lm_lineage_pilot.json

The regime and the arms are ``lm.lineage``'s (``REGIME``, ``ARMS``): each batch of 8 questions x 4 replies is
learned in 2 epochs of 2 mini-batches (4 optimiser steps, verl's ``ppo_epochs`` and ``ppo_mini_batch_size``),
with pi_old from a separate forward before the first of them, so the ratios leave 1 and a clip can bind; the
reference forward runs every step, for the KL to it. The arms: GRPO, DAPO's loss, Dr. GRPO, GSPO, CISPO, SAPO,
GRPO with a random reward (Shao et al., arXiv 2506.10947) with and without the clip, and last, if time allows,
the format verdict alone as the reward. The learning rate comes from a pilot (``--pilot``: GRPO's arm for
``PILOT_STEPS`` steps at each of ``PILOT_LRS``, seed 0, without the held-out measurement), which chapter 14 reads.

Each run is its own process and is stored the moment it ends; a stored run is skipped, so the set is built over
several sittings. A stored run whose config differs from what this script builds today is an error, and a
stored run is replaced only with ``--force``. Per run, besides ``real_lm_grpo.measured_run``'s record: every
optimiser step's gradient norm before clipping, by RL step (``grad_norms``), so the share of clipped steps is
read, not guessed from a mean.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from real_lm_grpo import (EVAL, list_runs, measured_run, open_record, run_missing, store,  # noqa: E402
                          stored_runs_parser)

from course_lib.lm import lineage                                  # noqa: E402
from course_lib.lm.lineage import ARMS, REGIME                     # noqa: E402
from course_lib.rl.config import make_config                       # noqa: E402

OUT = ROOT / "notebooks" / "data" / "real_lm_lineage.json"
PILOT_OUT = ROOT / "notebooks" / "data" / "real_lm_lineage_pilot.json"
STEPS = make_config("real").steps
PILOT_LRS, PILOT_STEPS = (1e-5, 2e-5), 4
PILOT = {f"lr_{lr:g}": dict(lr=lr) for lr in PILOT_LRS}       # GRPO's arm at another learning rate
SEEDS = (0, 1, 2)
# seed 0 of every arm first, so that each sitting leaves a whole picture to read
PLAN = ([f"{arm}/{seed}" for seed in SEEDS for arm in ARMS if arm != "format_only"]
        + [f"format_only/{seed}" for seed in SEEDS])
PILOT_PLAN = [f"{arm}/0" for arm in PILOT]


def arm_config(arm: str, seed: int, steps: int = STEPS):
    """``lm.lineage.arm_config``, and the pilot's arms: GRPO's at the pilot's learning rates."""
    if arm in PILOT:
        return replace(lineage.arm_config("grpo", seed, steps), **PILOT[arm])
    return lineage.arm_config(arm, seed, steps)


@contextlib.contextmanager
def gradient_norms(by_step: list):
    """Record every optimiser step's gradient norm before clipping (what ``clip_grad_norm_`` returns) into
    ``by_step[-1]``; the caller opens a new list per RL step. The trainer looks ``clip_grad_norm_`` up when it
    calls it, so wrapping the attribute sees each call."""
    original = torch.nn.utils.clip_grad_norm_

    def recording(*args, **kwargs):
        norm = original(*args, **kwargs)
        by_step[-1].append(float(norm))
        return norm
    torch.nn.utils.clip_grad_norm_ = recording
    try:
        yield
    finally:
        torch.nn.utils.clip_grad_norm_ = original


def one_run(arm: str, seed: int, steps: int, out: Path) -> None:
    """Train one (arm, seed) with its gradient norms recorded, measure it, store it in ``out``."""
    norms: list[list[float]] = [[]]
    with gradient_norms(norms):
        result = measured_run(arm_config(arm, seed, steps), f"{arm} seed {seed}", on_step=lambda row: norms.append([]),
                              measure_heldout=arm not in PILOT)
    result["grad_norms"] = norms[:-1]
    store(out, f"{arm}/{seed}", result)


def main(argv=None) -> None:
    p = stored_runs_parser(__doc__, None, None)                  # their defaults: the plan's or the pilot's
    p.add_argument("--runs", nargs="+", choices=PLAN + PILOT_PLAN, metavar="ARM/SEED")
    p.add_argument("--pilot", action="store_true", help="run the pilot (PILOT_PLAN, PILOT_STEPS) into PILOT_OUT")
    a = p.parse_args(argv)
    plan = PILOT_PLAN if a.pilot else PLAN
    a.runs = a.runs or plan
    a.steps = a.steps or (PILOT_STEPS if a.pilot else STEPS)
    out = Path(a.out or (PILOT_OUT if a.pilot else OUT))
    if a.one:
        return one_run(a.one[0], int(a.one[1]), a.steps, out)
    record = open_record(out, {"steps": a.steps, "regime": REGIME, "eval": EVAL}, arm_config, a.steps, a.force)
    if a.list:
        return list_runs(plan, record)
    run_missing(__file__, a.runs, out, record, a.force, ["--steps", str(a.steps)])
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
