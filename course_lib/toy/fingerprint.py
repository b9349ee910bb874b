"""A stored run's fingerprint: its config's first steps in float64, the same on every CPU.

A toy run in float32 is a chaotic trajectory: two CPUs whose kernels round differently (MKL and
oneDNN pick their code paths by CPU model, ATen by its capability flag) give other runs from the
warm start on. So a stored run can be replayed digit for digit only on the machine that made it.

The fingerprint is what another machine can still check: the config's first ``STEPS`` RL steps
with every parameter and float in float64 (``train(..., dtype=float64)``), after a warm start cut
to ``WARM_STEPS`` supervised steps. Reductions and matrix products still round differently across
CPUs, but at 1e-16; the supervised warm start amplifies that about tenfold every ten steps (measured:
1e-13 apart after 60 steps, 1e-2 after 160, even in float64), so only a short one stays portable.
After it every metric of those steps agrees across float paths to far better than ``RTOL``, and
the sampled tokens, the rewards and the accuracies (decided by comparisons) come out identical. A
change to the trainer or the library that alters what a config does (a loss knob ignored, another
pi_old, a flipped sign, another schedule) moves the fingerprint by far more than ``RTOL`` and fails
``tests/test_toy_stored.py`` on any machine, until the result file is regenerated.

    fp = fingerprint(cfg)                  # {"0/acc/heldout": 0.37..., "1/loss/policy": ..., ...}
    differences(stored_fp, fp)             # [] or one line per value that moved
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import torch

from ..rl.config import RunConfig

STEPS = 2                                 # RL steps after the warm start
WARM_STEPS = 60                           # supervised steps at most: greedy accuracy about 0.04, the
                                          # RL batch still has groups with signal
RTOL, ATOL = 1e-7, 1e-10                  # measured across float paths (AVX-512, ATen's plain kernels, AVX2 with
                                          # MKL_CBWR=COMPATIBLE): 2e-11 apart at most; make test-portable re-checks
NONDETERMINISTIC = ("time/", "speed/")    # wall-clock metrics; every other one is a function of the config


def fingerprint(cfg: RunConfig, steps: int = STEPS) -> dict[str, float]:
    """Every metric of step 0 and of the first ``steps`` RL steps of ``cfg`` in float64 after a warm
    start of at most ``WARM_STEPS`` steps, on one CPU thread, every monitor on: {"step/metric": value}. A config with
    changes during the run has them all take effect at step ``steps`` (its onsets come later than the
    fingerprinted steps)."""
    from ..rl.loss_step import ClipCannotBindWarning
    from ..rl.trainer import train                       # the trainer imports nothing from here
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # float64 throughout (autocast leaves float64 alone, so a precision knob would change nothing),
        # every monitor on (the reference forward every step)
        short = replace(cfg, device="cpu", num_threads=None, warm_steps=min(cfg.warm_steps, WARM_STEPS),
                        precision="fp32", sampler_precision=None, monitor_kl_ref=True)
        if cfg.changes:                  # every change at the last fingerprinted step, in order: the
                                         # schedule and the knobs it sets are fingerprinted too
            short = replace(short, changes={steps: cfg.knobs_changed_by(cfg.steps)})
        with warnings.catch_warnings():  # a replay of a stored config: whether its clip can bind is not news
            warnings.simplefilter("ignore", ClipCannotBindWarning)
            rows = train(short, progress=False, stop_after=steps, dtype=torch.float64).rows
    finally:
        torch.set_num_threads(before)
    return {f"{row['step']}/{key}": float(value) for row in rows for key, value in row.items()
            if key != "step" and not key.startswith(NONDETERMINISTIC)}


def differences(stored: dict[str, float], fresh: dict[str, float], *,
                rtol: float = RTOL, atol: float = ATOL) -> list[str]:
    """One line per metric that is missing, new, or apart by more than atol + rtol * |stored|.

    A metric the stored fingerprint has at no step was added to the trainer after it was made: it
    does not change what the config does, so it is not reported."""
    known = {k.split("/", 1)[1] for k in stored}
    out = [f"{k}: stored, no longer computed" for k in stored if k not in fresh]
    out += [f"{k}: computed, not stored" for k in fresh if k not in stored and k.split("/", 1)[1] in known]
    for k in stored.keys() & fresh.keys():
        a, b = stored[k], fresh[k]
        if math.isnan(a) and math.isnan(b):
            continue
        if not abs(a - b) <= atol + rtol * abs(a):           # NaN on one side only fails too
            out.append(f"{k}: stored {a!r}, the code gives {b!r} (apart by {abs(a - b):.3g})")
    return sorted(out)
