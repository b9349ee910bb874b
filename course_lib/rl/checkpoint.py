"""A run's state at the end of a step, in one file, so that an interrupted run goes on where it stopped and
logs the rows it would have logged without the interruption (``train(cfg, checkpoint=Checkpoint(path, ...))``).

The file holds the step, the History so far, the policy's weights and the reference's (the toy's reference is
a copy of its warm start; the real model's is reloaded from its folder and holds none), AdamW's state, the
learning-rate schedule's count, the sampler's past weights (a stale sampler's), the samples drawn so far and the
state of every random generator the run draws from. Times restart: ``time/elapsed_s`` counts from the resume.
A real-model checkpoint is about 1.6 GB (weights and AdamW's two moments in float32).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import RunConfig
from .history import History, config_record


@dataclass(frozen=True)
class Checkpoint:
    """Where a run's checkpoint lives and how often it is written: after every ``every``-th step and after the
    last one. ``resume=True`` starts from the file, which must exist and come from the same config."""
    path: str | os.PathLike
    every: int = 1
    resume: bool = False

    def __post_init__(self):
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"every must be an int >= 1 (write after every that many steps), got {self.every!r}")

    def due(self, step: int, last: int) -> bool:
        return step % self.every == 0 or step == last


def check_checkpoint(ckpt: Checkpoint | None, cfg: RunConfig) -> None:
    if ckpt is not None and cfg.world_size > 1:
        raise ValueError(f"checkpoint: a run on {cfg.world_size} ranks is not checkpointed (world_size must be 1)")


def save_checkpoint(ckpt: Checkpoint, *, step: int, hist: History, model, ref_model, opt, schedule, samplers,
                    drawn: int, gens: dict[str, torch.Generator]) -> None:
    """Write the state after ``step`` (to a temporary file first, so an interruption leaves the last one whole)."""
    state = {"step": step, "config": hist.config, "rows": hist.rows, "warm_start_s": hist.warm_start_s,
             "model": model.state_dict(), "ref": ref_model.state_dict(), "opt": opt.state_dict(),
             "schedule_done": schedule.done,
             "snapshots": list(samplers.snapshots), "drawn": drawn,
             "gens": {k: g.get_state() for k, g in gens.items()}}
    path = Path(ckpt.path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def restore_checkpoint(ckpt: Checkpoint, cfg: RunConfig, *, model, ref_model, opt, schedule, samplers,
                       gens: dict[str, torch.Generator]) -> tuple[int, History, int]:
    """Load ``ckpt.path`` into the run's objects -> (the step it ended, its History, samples drawn)."""
    path = Path(ckpt.path)
    if not path.is_file():
        raise FileNotFoundError(f"resume=True but the checkpoint file {str(path)!r} does not exist "
                                f"(it is written by a run with checkpoint=Checkpoint({str(path)!r}))")
    state = torch.load(path, map_location=next(model.parameters()).device, weights_only=True)
    want = config_record(cfg)
    differ = sorted(k for k in set(want) | set(state["config"]) if want.get(k) != state["config"].get(k))
    if differ:
        raise ValueError(f"the checkpoint {str(path)!r} was written by another config: "
                         + ", ".join(f"{k} {state['config'].get(k)!r} there, {want.get(k)!r} here" for k in differ))
    model.load_state_dict(state["model"])
    if state["ref"] is not None:                       # None: a file written before pi_ref saved its own
        ref_model.load_state_dict(state["ref"])
    opt.load_state_dict(state["opt"])
    schedule.done = state["schedule_done"]
    samplers.snapshots.clear()
    samplers.snapshots.extend(state["snapshots"])
    for k, g in gens.items():
        g.set_state(state["gens"][k])
    hist = History(config=state["config"], rows=state["rows"], warm_start_s=state["warm_start_s"])
    return state["step"], hist, state["drawn"]
