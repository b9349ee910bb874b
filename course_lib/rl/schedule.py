"""The learning rate of each optimiser step: linear warm-up, then constant or cosine."""
from __future__ import annotations

import math

from .config import RunConfig


def lr_at(cfg: RunConfig, opt_step: int, total_opt_steps: int) -> float:
    """Linear warm-up over warmup_steps optimiser steps, then constant or cosine to lr_min."""
    warm = min(1.0, (opt_step + 1) / max(cfg.warmup_steps, 1))
    if cfg.lr_schedule == "constant":
        return cfg.lr * warm
    frac = min(opt_step / max(total_opt_steps - 1, 1), 1.0)
    return warm * (cfg.lr_min + (cfg.lr - cfg.lr_min) * 0.5 * (1 + math.cos(math.pi * frac)))


class LrSchedule:
    """Counts a run's optimiser steps and gives each its learning rate under the config in force."""

    def __init__(self, cfg: RunConfig):
        self.total = cfg.steps * cfg.epochs * cfg.minibatches
        self.done = 0

    def next_lr(self, cfg: RunConfig) -> float:
        self.done += 1
        return lr_at(cfg, self.done - 1, self.total)
