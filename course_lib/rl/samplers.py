"""The sampler's weights when it is not the learner: a bfloat16 copy, or one that falls behind.

A run with ``mismatch`` "bf16" samples with a bfloat16 copy of the learner, loaded before each step;
with "stale", with the learner's weights ``stale_steps`` optimiser steps old. The past weights are
kept from the first step on, so a sampler that falls behind mid-run (``RunConfig.changes``) is behind
at once. Without a mismatch the learner samples its own responses.
"""
from __future__ import annotations

import collections
import copy

import torch

from .config import RunConfig


class Samplers:
    """One sampler per mismatch a run's phases use, and the learner's recent weights for a stale one."""

    def __init__(self, phases: list[RunConfig], model: torch.nn.Module, state: dict):
        self.uses = {c.mismatch for c in phases}
        self.models = {m: copy.deepcopy(model).requires_grad_(False) for m in ("bf16", "stale") if m in self.uses}
        if "bf16" in self.models:
            self.models["bf16"] = self.models["bf16"].to(torch.bfloat16)
        max_stale = max(c.stale_steps for c in phases if c.mismatch == "stale") if "stale" in self.uses else 0
        self.snapshots = collections.deque([copy.deepcopy(state)] if "stale" in self.uses else [],
                                           maxlen=max_stale + 1)

    def for_step(self, cfg: RunConfig, model: torch.nn.Module) -> torch.nn.Module:
        """The model that samples this step (``cfg``: the config in force), its weights loaded."""
        sampler = self.models.get(cfg.mismatch, model)
        if cfg.mismatch == "stale":                               # stale_steps optimiser steps old
            sampler.load_state_dict(self.snapshots[max(len(self.snapshots) - 1 - cfg.stale_steps, 0)])
        elif cfg.mismatch == "bf16":
            sampler.load_state_dict(model.state_dict())           # cast to bfloat16 on copy
        return sampler

    def after_opt_step(self, model: torch.nn.Module) -> None:
        """Keep the learner's weights after an optimiser step (only a run with a stale sampler)."""
        if "stale" in self.uses:
            self.snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
