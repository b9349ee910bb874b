"""Where one GRPO step on the real model spends its time, and the process's peak memory.

    .venv/bin/python benchmarks/real_lm_step.py        # on an idle machine: 5 steps -> notebooks/data/real_lm_step.json
    .venv/bin/python benchmarks/real_lm_step.py --steps 2 --prompts 2 --tokens 8 --out /tmp/x.json   # does it run
    .venv/bin/python benchmarks/real_lm_step.py --lora-rank 1  # the same step with LoRA adapters -> real_lm_step_lora.json

The course's trainer runs ``make_config("real")`` (8 prompts x 4 samples x <= 48 new tokens, full fine-tuning in
float32 with AdamW, 8 micro-batches) for ``--steps`` steps without an evaluation step; with ``--lora-rank`` the same
run with LoRA adapters of that rank on every linear layer (``lm.lora``, policy "smollm2_lora") instead. Nothing in the trainer is
changed: its rows give each step's sampling (``time/sample_s``), the batch's constants before the loss
(``time/targets_s``: pi_old and pi_ref forwards without gradient when they run, advantages, corrections) and
the learner's part (``time/learn_s``); this script splits the learner's part further by timing every call of
the policy's forward made with gradient on (the loss forwards) and every optimiser step (a global optimiser
hook), the backward being what is left (with it the loss's arithmetic after the logits and the gradient
clipping). The first step is left out of the medians (it carries set-up). Printed: the median of each part
over the timed steps, its share of the step, and the peak resident memory (``ru_maxrss``); stored with each
step's parts and the machine (chapter 13 reads the record). The targets are <= 40 s a step and <= 4 GB on
2 cores; the figures mean something only on an idle machine (the record keeps the load average at the start
and the end).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from real_lm_task import environment                             # noqa: E402

from course_lib.lm.policy import ChatPolicy                      # noqa: E402
from course_lib.rl import trainer                                # noqa: E402
from course_lib.rl.config import make_config                     # noqa: E402

OUT = ROOT / "notebooks" / "data" / "real_lm_step.json"
OUT_LORA = ROOT / "notebooks" / "data" / "real_lm_step_lora.json"
PARTS = ("sample", "targets", "loss forward", "backward", "optimizer", "other")


class Timers:
    """Seconds per step of the learner's forwards (gradient on) and of the optimiser steps."""

    def __init__(self):
        self.step = 0
        self.forward, self.optimizer = {}, {}
        self._t0 = None

    def add(self, table: dict, seconds: float) -> None:
        table[self.step] = table.get(self.step, 0.0) + seconds

    def install(self) -> None:
        forward, collect = ChatPolicy.forward, trainer.collect

        def timed_forward(policy, *args, **kwargs):
            if not torch.is_grad_enabled():
                return forward(policy, *args, **kwargs)
            t = time.perf_counter()
            out = forward(policy, *args, **kwargs)
            self.add(self.forward, time.perf_counter() - t)
            return out

        def counted_collect(*args, **kwargs):     # called once at the start of every step
            self.step += 1
            return collect(*args, **kwargs)

        def pre(opt, args, kwargs):
            self._t0 = time.perf_counter()

        def post(opt, args, kwargs):
            self.add(self.optimizer, time.perf_counter() - self._t0)

        ChatPolicy.forward, trainer.collect = timed_forward, counted_collect
        register_optimizer_step_pre_hook(pre)
        register_optimizer_step_post_hook(post)


def split(rows: list[dict], timers: Timers) -> dict[int, dict[str, float]]:
    """Step -> seconds per part; the parts add up to the step's wall time."""
    out = {}
    for r in rows:
        s = r["step"]
        fwd, opt = timers.forward.get(s, 0.0), timers.optimizer.get(s, 0.0)
        parts = {"sample": r["time/sample_s"], "targets": r["time/targets_s"], "loss forward": fwd,
                 "backward": r["time/learn_s"] - fwd - opt, "optimizer": opt}
        parts["other"] = r["time/step_s"] - sum(parts.values())
        out[s] = parts
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=5, help="steps run; the first is not timed")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lora-rank", type=int, help="LoRA adapters of this rank instead of full fine-tuning")
    p.add_argument("--out")
    a = p.parse_args(argv)
    if a.steps < 2:
        p.error(f"--steps must be >= 2 (the first is not timed), got {a.steps}")
    load = os.getloadavg()[0]
    lora = {} if a.lora_rank is None else dict(policy="smollm2_lora", lora_rank=a.lora_rank)
    a.out = a.out or str(OUT if a.lora_rank is None else OUT_LORA)
    cfg = make_config("real", steps=a.steps + 1, eval_every=a.steps + 1, prompts_per_step=a.prompts,
                      group_size=a.samples, max_new_tokens=a.tokens, num_threads=a.threads,
                      micro_batches=min(8, a.prompts * a.samples), **lora)
    timers = Timers()
    timers.install()
    t0 = time.perf_counter()
    hist = trainer.train(cfg, progress=True, stop_after=a.steps, desc="real-model steps")   # no evaluation step
    wall = time.perf_counter() - t0
    per_step = split(hist.rows[1:], timers)
    timed = [per_step[s] for s in sorted(per_step)[1:]]
    medians = {part: statistics.median(t[part] for t in timed) for part in PARTS}
    step_s = statistics.median(sum(t.values()) for t in timed)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    mean_reply = statistics.mean(r["len/all"] for r in hist.rows[2:])
    env = {**environment(), "load_average_start": round(load, 2), "load_average_end": round(os.getloadavg()[0], 2)}
    print(f"{env['date']}: {env['cpu']} ({env['capability']}), {a.threads} thread(s), torch {env['torch']}; "
          f"load average {env['load_average_start']:.2f} at the start, {env['load_average_end']:.2f} at the end")
    print(f"{a.prompts} prompts x {a.samples} samples x <= {a.tokens} new tokens, {cfg.micro_batches} micro-batches; "
          f"{a.steps} steps in {wall:.0f} s (with loading the model); medians over steps 2..{a.steps}:")
    for part in PARTS:
        print(f"  {part:<13} {medians[part]:6.2f} s  {medians[part] / step_s:6.1%}")
    print(f"  {'step':<13} {step_s:6.2f} s")
    print(f"mean reply {mean_reply:.1f} tokens; peak resident memory {peak_gb:.2f} GB")
    record = {"sizes": {"prompts": a.prompts, "samples": a.samples, "tokens": a.tokens, "steps": a.steps,
                        "micro_batches": cfg.micro_batches}, "lora_rank": a.lora_rank,
              "steps": {str(s): per_step[s] for s in sorted(per_step)}, "median_s": medians, "median_step_s": step_s,
              "mean_reply": mean_reply, "peak_rss_gb": peak_gb, "wall_s": wall, "environment": env}
    Path(a.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
