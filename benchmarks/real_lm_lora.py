"""LoRA or full fine-tuning for RL on the real model: chapter 13's run (``make_config("real")``: the task, its
split, the reply categories, the budget of 30 steps of 8 questions x 4 replies) with LoRA adapters
(``lm.lora``, policy "smollm2_lora") at a sweep of learning rates, beside full fine-tuning, then more seeds at each
setting's best learning rate; each run measured on the held-out questions as ``real_lm_grpo.py`` does.

    .venv/bin/python benchmarks/real_lm_lora.py --list                    # the plan, and what is stored
    .venv/bin/python benchmarks/real_lm_lora.py --runs r1_lr2e-4/0        # one run
    .venv/bin/python benchmarks/real_lm_lora.py                           # every missing run of the sweep

The arms (``ARMS``): ``r1_lr<lr>``, rank 1 on every linear layer (alpha 32, as Thinking Machines' "LoRA Without
Regret" keeps it), at ``LORA_LRS``: from full fine-tuning's 2e-5 (the learning rate a reader copies over) to 100
times it; ``full_lr<lr>``, full fine-tuning at ``FULL_LRS``. Full fine-tuning at 5e-6, 2e-5 and 5e-5 seed 0 is
chapter 13's stored runs (``real_lm_grpo.json``: ``lr_5e-6``, ``grpo``, ``lr_5e-5``), the same config, so the sweep
reads them and does not train them again. ``--seeds 1 2 --runs ARM`` adds seeds of an arm once its best learning
rate is known.

Each run is its own process and is stored the moment it ends (``notebooks/data/real_lm_lora.json``); a stored run
is skipped, a stored run whose config differs from today's is an error, and ``--force`` trains it again.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from real_lm_grpo import (EVAL, list_runs, measured_run, open_record, run_missing, store,  # noqa: E402
                          stored_runs_parser)

from course_lib.rl.config import make_config                       # noqa: E402

OUT = ROOT / "notebooks" / "data" / "real_lm_lora.json"
STEPS = make_config("real").steps
LORA = dict(policy="smollm2_lora", lora_rank=1, lora_alpha=32.0, lora_targets=("all-linear",))
LORA_LRS = (2e-5, 6e-5, 2e-4, 6e-4, 2e-3)
FULL_LRS = (1e-5,)                         # besides chapter 13's 5e-6, 2e-5 and 5e-5
ARMS = {**{f"r1_lr{lr:.0e}": dict(LORA, lr=lr) for lr in LORA_LRS},
        **{f"full_lr{lr:.0e}": dict(lr=lr) for lr in FULL_LRS}}
PLAN = [f"{arm}/0" for arm in ARMS]


def arm_config(arm: str, seed: int, steps: int = STEPS):
    """``make_config("real")`` with the arm's diff (``ARMS``)."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {sorted(ARMS)}, got {arm!r}")
    return replace(make_config("real", seed=seed, steps=steps, num_threads=2), **ARMS[arm])


def main(argv=None) -> None:
    p = stored_runs_parser(__doc__, OUT, STEPS)
    p.add_argument("--runs", nargs="+", metavar="ARM/SEED or ARM", help="runs of the plan, or arms with --seeds")
    p.add_argument("--seeds", nargs="+", type=int, help="with --runs ARM ...: these seeds of each arm")
    a = p.parse_args(argv)
    out = Path(a.out)
    if a.one:
        arm, seed = a.one[0], int(a.one[1])
        return store(out, f"{arm}/{seed}", measured_run(arm_config(arm, seed, a.steps), f"{arm} seed {seed}"))
    keys = a.runs or PLAN
    if a.seeds:
        keys = [f"{arm}/{s}" for arm in keys for s in a.seeds]
    for key in keys:
        arm, _, seed = key.partition("/")
        if arm not in ARMS or not seed.isdigit():
            raise SystemExit(f"{key!r}: a run is ARM/SEED with ARM one of {sorted(ARMS)}")
    record = open_record(out, {"steps": a.steps, "eval": EVAL}, arm_config, a.steps, a.force)
    if a.list:
        return list_runs(sorted(set(PLAN) | set(record["runs"])), record)
    run_missing(__file__, keys, out, record, a.force, ["--steps", str(a.steps)])
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
