"""The real model trained by TRL's own GRPOTrainer beside the course's trainer: the time of a step, side by side.

    .venv-peers/bin/python benchmarks/trl_real.py             # on an idle machine: writes notebooks/data/trl_real.json
    .venv-peers/bin/python benchmarks/trl_real.py --steps 1 --prompts 2 --samples 2 --tokens 4 --out /tmp/x.json
                                                              # a check that both trainers run (no timing worth keeping)
    .venv-peers/bin/python benchmarks/trl_real.py --lora-rank 1   # both with rank-1 LoRA: trl_real_lora.json

Runs in the peers environment (`make peers-venv`: TRL 1.16.0 and course_lib), offline, on the CPU, without vLLM.
The model is `make model`'s folder (the course's venv holds it; $COURSE_LM_DIR overrides). Both trainers train
SmolLM2-135M-Instruct from its pretrained weights on the chat addition task with the same settings (the "real"
config: 8 prompts x 4 samples of at most 48 new tokens, one optimiser step per batch in one micro-batch per group,
lr 2e-5, reward = exact + 0.5 x format, GRPO's loss and its sequence-mean aggregation, no KL term), in one
process on ``--threads`` threads, taking turns a step at a time: a course step, then a TRL step, and so on, each
trainer in its own thread and the other one waiting (``Turns``), so that both see the same machine at the same
moments and a change of load falls on both:

- the course: ``course_lib.rl.trainer.train`` on ``make_config("real")``, handing over between its steps
  (``train``'s ``on_step``);
- TRL: ``trl.GRPOTrainer`` with ``GRPOConfig(**frameworks.to_trl(cfg))`` plus the machine's settings (CPU,
  float32, no vLLM, no checkpoints, no activation checkpointing, one log row a step), on its own copy of the
  model loaded by ``course_lib.lm.load``, its tokenizer, the task's questions as chat prompts (system + user
  turns: TRL applies the chat template) and two reward functions, course_lib.lm.task's ``exact`` and
  ``formatted`` verdicts, weighted 1 and 0.5 (``reward_weights``): ``course_lib.lm.trl_recipe``; it hands over
  at the start of its next step (a callback) and after its last.
tests/peers/test_trl_real.py checks, on a prepared batch, that the two take the same first step.

Timed: each step's wall time, its own work only (from the step's start to the hand-over), over the steps after
the first (it carries set-up) and, for the course, before the last (the course's trainer evaluates the held-out
questions inside its last step; TRL evaluates nothing). Printed: each trainer's median step and the range of its
timed steps, the ratio of the medians and the range of the ratio over steps run back to back, the load average
(at the start, at each hand-over, at the end), and where each step's time goes: for the course its own rows'
``time/sample_s``, ``time/targets_s`` (pi_old's monitors from each micro-batch's forward; no separate forward at
this config), ``time/learn_s`` (loss forwards, backwards, the optimiser step), the rest (rewards, metrics); for
TRL generation, scoring (rewards, advantages, padding, metrics), the loss's forward, the backward and the
optimiser, the rest (the Trainer's bookkeeping). Both trainers run in one process of the peers venv, so they use
the same torch, transformers and accelerate (tests/peers-requirements.txt pins the versions of the course's lock).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_lib import frameworks as fw                         # noqa: E402
from course_lib import lm                                       # noqa: E402
from course_lib.lm import task                                  # noqa: E402
from course_lib.lm.trl_recipe import dataset, reward_funcs         # noqa: E402
from course_lib.rl.config import make_config                   # noqa: E402
from course_lib.rl.history import config_record                # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import trl_toy                                                  # noqa: E402  (its step clock and machine record)

OUT = ROOT / "notebooks" / "data" / "trl_real.json"
OUT_LORA = ROOT / "notebooks" / "data" / "trl_real_lora.json"
# `make model` builds the folder inside the course's venv; the peers venv has none of its own (lm.cache_dir()
# would point inside .venv-peers), so the course's is used unless $COURSE_LM_DIR names another
COURSE_MODEL = ROOT / ".venv" / "share" / "course_lib" / "smollm2-135m-instruct"
# What the machine adds to to_trl's settings: a CPU without vLLM or bf16, no files, one log row a step, and no
# activation (gradient) checkpointing: on by default in GRPOConfig, it would recompute every forward in the
# backward, which the course's trainer does not do (its deprecated name `gradient_checkpointing` warns)
MACHINE = {"use_cpu": True, "bf16": False, "use_vllm": False, "report_to": "none", "save_strategy": "no",
           "logging_steps": 1, "disable_tqdm": True, "activation_checkpointing": False,
           "dataloader_num_workers": 0}


def use_course_model() -> Path:
    """Point course_lib.lm at `make model`'s folder (unless $COURSE_LM_DIR is set) -> the folder; raises
    lm.ModelNotBuilt, naming `make model`, when it is not built."""
    os.environ.setdefault(lm.CACHE_VARIABLE, str(COURSE_MODEL))
    folder = lm.cache_dir()
    if not lm.is_built(folder):
        raise lm.ModelNotBuilt(f"no built model in {folder}: run `make model` once (about a minute), or set "
                               f"${lm.CACHE_VARIABLE} to a built folder")
    return folder


def trl_settings(cfg, steps: int, seed: int, output_dir: str) -> dict:
    """GRPOConfig keywords: to_trl's translation of ``cfg`` and the machine's settings."""
    kw = {k: v for k, v, _ in fw.to_trl(cfg) if not k.startswith("#")}
    return {**kw, **MACHINE, "max_steps": steps, "seed": seed, "output_dir": output_dir}


def trl_trainer(cfg, model, tokenizer, data, steps: int, output_dir: str, callbacks=(), peft_config=None):
    """TRL's GRPOTrainer on ``model`` (a LlamaForCausalLM, e.g. ``lm.load("fp32").model``) and the questions
    ``data`` (``dataset``), its log lines off (the callbacks keep what they need). ``peft_config``: LoRA adapters
    TRL puts on the model (``peft.LoraConfig(**frameworks.peft_lora_kwargs(cfg))`` for a LoRA run)."""
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    args = GRPOConfig(**trl_settings(cfg, steps, cfg.seed, output_dir))
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs(cfg), args=args, train_dataset=data,
                          processing_class=tokenizer, callbacks=list(callbacks), peft_config=peft_config)
    trainer.remove_callback(PrinterCallback)
    return trainer


def bench_config(steps: int, prompts: int, samples: int, tokens: int, threads: int, seed: int = 0,
                 lora_rank: int | None = None):
    """The "real" config at another size: one micro-batch per group (the real config's 8 of 8 groups); with
    ``lora_rank``, LoRA adapters of that rank on every linear layer (policy "smollm2_lora")."""
    lora = {} if lora_rank is None else dict(policy="smollm2_lora", lora_rank=lora_rank)
    return make_config("real", steps=steps, prompts_per_step=prompts, group_size=samples, max_new_tokens=tokens,
                       micro_batches=prompts, eval_every=steps, seed=seed, device="cpu", num_threads=threads,
                       **lora)


def peft_config(cfg):
    """peft's ``LoraConfig`` of a LoRA config (``frameworks.peft_lora_kwargs``), None for full fine-tuning."""
    if cfg.policy != "smollm2_lora":
        return None
    from peft import LoraConfig
    return LoraConfig(**fw.peft_lora_kwargs(cfg))


# ----------------------------------------------------------------------------------------------
# the two runs, a step each in turn
# ----------------------------------------------------------------------------------------------
class Turns:
    """Two trainers in one process, a step each in turn. ``wait(me)`` returns once it is ``me``'s turn or the
    other has finished; ``hand_over(me)`` gives the turn to the other; ``finish(me)`` ends ``me``'s turns for
    good (also when it fails, so that the other is never left waiting). ``load`` keeps, at each hand-over, who
    handed over and the load average then."""

    def __init__(self, first: str, second: str):
        self.names, self.turn, self.finished, self.load = (first, second), first, set(), []
        self.cv = threading.Condition()

    def other(self, me: str) -> str:
        return self.names[1 - self.names.index(me)]

    def wait(self, me: str) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.turn == me or self.other(me) in self.finished)

    def hand_over(self, me: str) -> None:
        with self.cv:
            self.load.append((me, round(os.getloadavg()[0], 2)))
            self.turn = self.other(me)
            self.cv.notify_all()

    def finish(self, me: str) -> None:
        with self.cv:
            self.finished.add(me)
            self.turn = self.other(me)
            self.cv.notify_all()


def run_course(cfg, turns: Turns) -> dict:
    """``train(cfg)``, handing over to the other trainer between steps: every step's wall time, its phases from
    the trainer's own rows, the mean reply length."""
    from course_lib.rl import train

    def between(row):
        turns.hand_over("course")
        turns.wait("course")

    turns.wait("course")
    t0 = time.perf_counter()
    try:
        hist = train(cfg, progress=False, on_step=between)
    finally:
        turns.finish("course")
    rows = hist.rows[1:]
    step_s = [r["time/step_s"] for r in rows]
    phases = {"sample": [r["time/sample_s"] for r in rows], "targets": [r["time/targets_s"] for r in rows],
              "learn": [r["time/learn_s"] for r in rows]}
    phases["other"] = [t - sum(v[i] for v in phases.values()) for i, t in enumerate(step_s)]
    return {"step_s": step_s, "phases": phases, "mean_length": [r["len/all"] for r in rows],
            "reward": [r["reward/mean"] for r in rows], "grad_norm": [r["grad/norm"] for r in rows],
            "timed": list(range(1, len(rows) - 1)), "wall_s": time.perf_counter() - t0,
            "threads": torch.get_num_threads()}


def run_trl(cfg, turns: Turns) -> dict:
    """TRL's GRPOTrainer for ``cfg.steps`` steps on a fresh copy of the model, loaded in its first turn, handing
    over at the start of each step after the first and at the end: every step's wall time (from its start to the
    hand-over), its phases, the mean reply length, and how many parameters TRL trains (``trainable``: the
    adapters' with ``peft_config``)."""
    turns.wait("TRL")
    torch.set_num_threads(cfg.num_threads)          # this thread's own OpenMP setting
    t0 = time.perf_counter()
    out = {"mean_length": [], "reward": [], "grad_norm": []}

    class Clock(trl_toy.PhaseClock):
        def __init__(self):
            super().__init__()
            self.end = []

        def on_step_begin(self, args, st, control, **kw):
            if self.begin:                          # the step before is done: the other trainer's turn
                self.end.append(time.perf_counter())
                turns.hand_over("TRL")
                turns.wait("TRL")
            super().on_step_begin(args, st, control, **kw)

        def on_train_end(self, args, st, control, **kw):
            self.end.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                out["mean_length"].append(logs["completions/mean_length"])
                out["reward"].append(logs["reward"])
                out["grad_norm"].append(logs["grad_norm"])

    try:
        chat = lm.load("fp32")
        data = dataset(task.ChatAdditionTask(heldout_pairs=cfg.heldout_pairs).questions("train"))
        clock = Clock()
        with tempfile.TemporaryDirectory() as tmp:
            trainer = trl_trainer(cfg, chat.model, chat.tokenizer, data, cfg.steps, tmp, callbacks=[clock],
                                  peft_config=peft_config(cfg))
            clock.wrap(trainer)
            out["trainable"] = sum(x.numel() for x in trainer.model.parameters() if x.requires_grad)
            trainer.train()
    finally:
        turns.finish("TRL")
    out["step_s"] = [b - a for a, b in zip(clock.begin, clock.end)]
    out.update(phases=clock.finish(out["step_s"]), timed=list(range(1, len(out["step_s"]))),
               wall_s=time.perf_counter() - t0, threads=torch.get_num_threads())
    return out


def interleaved(cfg) -> tuple[dict, list]:
    """Both runs, a step each in turn (the course first) -> ({"course": run, "TRL": run}, the hand-overs'
    (trainer, load average))."""
    turns = Turns("course", "TRL")
    with ThreadPoolExecutor(2) as pool:
        course, trl = pool.submit(run_course, cfg, turns), pool.submit(run_trl, cfg, turns)
        return {"course": course.result(), "TRL": trl.result()}, turns.load


CURVE_KEYS = ("reward", "rewards/exact_reward/mean", "rewards/format_reward/mean", "completions/mean_length",
              "completions/clipped_ratio", "entropy", "grad_norm", "frac_reward_zero_std", "learning_rate")


def trl_curve(steps: int, seed: int = 0, threads: int = 2) -> dict:
    """TRL's own learning curve on chapter 13's run: ``GRPOTrainer`` for ``steps`` steps of ``make_config("real")``
    (seed ``seed``) from the pretrained weights, on the training questions, each step's logged metrics
    (``CURVE_KEYS``, those TRL logs): what chapter 13 draws beside the course's seeds."""
    from transformers import TrainerCallback
    cfg = make_config("real", steps=steps, seed=seed, device="cpu", num_threads=threads)
    torch.set_num_threads(threads)
    chat = lm.load("fp32")
    data = dataset(task.ChatAdditionTask(heldout_pairs=cfg.heldout_pairs).questions("train"))
    rows: list[dict] = []

    class Log(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                rows.append({"step": state.global_step, **{k: float(logs[k]) for k in CURVE_KEYS if k in logs}})

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        trl_trainer(cfg, chat.model, chat.tokenizer, data, steps, tmp, callbacks=[Log()]).train()
    return {"config": config_record(cfg), "trl_config": fw.trl_text(cfg), "trl_machine": MACHINE, "rows": rows,
            "wall_s": round(time.perf_counter() - t0, 1), "environment": trl_toy.environment(threads)}


def summary(run: dict) -> dict:
    """The median step time and the median of each phase over the timed steps (all steps when a run is too
    short to leave any out: then set-up and evaluation are inside, and ``all_steps`` says so)."""
    idx = run["timed"] or list(range(len(run["step_s"])))
    timed = [run["step_s"][i] for i in idx]
    return {"median_step_s": statistics.median(timed), "step_s_range": [min(timed), max(timed)],
            "timed_steps": len(idx),
            "all_steps": not run["timed"],
            "median_phase_s": {k: statistics.median(v[i] for i in idx) for k, v in run["phases"].items()},
            "mean_length": statistics.fmean(run["mean_length"][i] for i in idx)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12,
                   help="steps of each trainer (timed: the course's 2..steps-1, TRL's 2..steps)")
    p.add_argument("--prompts", type=int, default=8, help="prompts per step (P)")
    p.add_argument("--samples", type=int, default=4, help="samples per prompt (G)")
    p.add_argument("--tokens", type=int, default=48, help="new tokens at most per sample")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lora-rank", type=int, help="LoRA adapters of this rank on both sides (TRL: peft_config)")
    p.add_argument("--out", help=f"default {OUT.name}, or {OUT_LORA.name} with --lora-rank")
    a = p.parse_args(argv)
    a.out = a.out or str(OUT if a.lora_rank is None else OUT_LORA)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    folder = use_course_model()
    cfg = bench_config(a.steps, a.prompts, a.samples, a.tokens, a.threads, a.seed, a.lora_rank)
    env = trl_toy.environment(a.threads)
    print(f"{env['date']}: {env['cpu']}, {env['cpus']} CPUs, {a.threads} thread(s), torch {env['torch']}, "
          f"transformers {env['transformers']}, TRL {env['trl']}; load average {env['load_average_start']}; "
          f"model {folder}", flush=True)
    print(f"{a.prompts} prompts x {a.samples} samples x <= {a.tokens} new tokens, {a.steps} step(s) each, "
          f"a course step and a TRL step in turn", flush=True)
    if env["load_average_start"] > 0.5:
        print(f"warning: load average {env['load_average_start']}: the machine is busy; both trainers share the "
              f"load, but the times will be too long; measure on an idle machine", flush=True)
    runs, load = interleaved(cfg)
    for name, run in runs.items():
        run["summary"] = s = summary(run)
        ph = ", ".join(f"{k} {v:.2f}" for k, v in s["median_phase_s"].items())
        lo, hi = s["step_s_range"]
        note = " (all steps: set-up and evaluation inside)" if s["all_steps"] else ""
        print(f"{name:>6}: median step {s['median_step_s']:.2f} s, range {lo:.2f}-{hi:.2f} s over "
              f"{s['timed_steps']} step(s){note}: {ph}; mean reply {s['mean_length']:.1f} tokens", flush=True)
    ratio = runs["TRL"]["summary"]["median_step_s"] / runs["course"]["summary"]["median_step_s"]
    pairs = pair_ratios(runs)
    env["load_average_end"] = round(os.getloadavg()[0], 2)
    loads = [x for _, x in load]
    print(f"TRL / course, median step time: {ratio:.2f}x; step by step (a course step, then TRL's): "
          f"{min(pairs):.2f}-{max(pairs):.2f}x over {len(pairs)} pairs")
    print(f"load average: {env['load_average_start']} at the start, {min(loads)}-{max(loads)} at the hand-overs, "
          f"{env['load_average_end']} at the end")
    record = {"config": config_record(cfg), "trl_config": fw.trl_text(cfg), "trl_machine": MACHINE,
              "sizes": {"prompts": a.prompts, "samples": a.samples, "tokens": a.tokens, "steps": a.steps},
              "environment": env, "interleaved": True, "load_at_hand_over": load, "runs": runs,
              "step_time_ratio": ratio, "pair_ratios": pairs}
    trl_toy.write_record(record, a.out)


def pair_ratios(runs: dict) -> list[float]:
    """TRL's step over the course's step just before it, for every step both time."""
    both = sorted(set(runs["course"]["timed"]) & set(runs["TRL"]["timed"]))
    return [runs["TRL"]["step_s"][i] / runs["course"]["step_s"][i] for i in both]


if __name__ == "__main__":
    main()
