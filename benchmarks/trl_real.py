"""The real model trained by TRL's own GRPOTrainer beside the course's trainer: the time of a step, side by side.

    .venv-peers/bin/python benchmarks/trl_real.py             # on an idle machine: writes notebooks/data/trl_real.json
    .venv-peers/bin/python benchmarks/trl_real.py --steps 1 --prompts 2 --samples 2 --tokens 4 --out /tmp/x.json
                                                              # a check that both trainers run (no timing worth keeping)

Runs in the peers environment (`make peers-venv`: TRL 1.16.0 and course_lib), offline, on the CPU, without vLLM.
The model is `make model`'s folder (the course's venv holds it; $COURSE_LM_DIR overrides). Both trainers train
SmolLM2-135M-Instruct from its pretrained weights on the chat addition task with the same settings (the "real"
config: 8 prompts x 4 samples of at most 48 new tokens, one optimiser step per batch in one micro-batch per group,
lr 2e-5, reward = exact + 0.5 x format, GRPO's loss and its sequence-mean aggregation, no KL term), in one
process, one after the other, on ``--threads`` threads:

- the course: ``course_lib.rl.trainer.train`` on ``make_config("real")``;
- TRL: ``trl.GRPOTrainer`` with ``GRPOConfig(**frameworks.to_trl(cfg))`` plus the machine's settings (CPU,
  float32, no vLLM, no checkpoints, no activation checkpointing, one log row a step), on its own copy of the
  model loaded by ``course_lib.lm.load``, its tokenizer, the task's questions as chat prompts (system + user
  turns: TRL applies the chat template) and two reward functions, course_lib.lm.task's ``exact`` and
  ``formatted`` verdicts, weighted 1 and 0.5 (``reward_weights``): ``course_lib.lm.trl_recipe``.
tests/peers/test_trl_real.py checks, on a prepared batch, that the two take the same first step.

Timed: the median wall time of a step, over the steps after the first (it carries set-up) and, for the course,
before the last (the course's trainer evaluates the held-out questions inside its last step; TRL evaluates
nothing). Printed: both medians, their ratio TRL / course, and where each step's time goes: for the course its
own rows' ``time/sample_s``, ``time/targets_s`` (pi_old's monitors from each micro-batch's forward; no separate
forward at this config), ``time/learn_s`` (loss forwards, backwards, the optimiser step), the rest (rewards,
metrics); for TRL generation, scoring (rewards, advantages, padding, metrics), the loss's forward, the backward
and the optimiser, the rest (the Trainer's bookkeeping). The timing means something only on an idle machine:
the record keeps the load average at the start and the end.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
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


def trl_trainer(cfg, model, tokenizer, data, steps: int, output_dir: str, callbacks=()):
    """TRL's GRPOTrainer on ``model`` (a LlamaForCausalLM, e.g. ``lm.load("fp32").model``) and the questions
    ``data`` (``dataset``), its log lines off (the callbacks keep what they need)."""
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    args = GRPOConfig(**trl_settings(cfg, steps, cfg.seed, output_dir))
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs(cfg), args=args, train_dataset=data,
                          processing_class=tokenizer, callbacks=list(callbacks))
    trainer.remove_callback(PrinterCallback)
    return trainer


def bench_config(steps: int, prompts: int, samples: int, tokens: int, threads: int, seed: int = 0):
    """The "real" config at another size: one micro-batch per group (the real config's 8 of 8 groups)."""
    return make_config("real", steps=steps, prompts_per_step=prompts, group_size=samples, max_new_tokens=tokens,
                       micro_batches=prompts, eval_every=steps, seed=seed, device="cpu", num_threads=threads)


# ----------------------------------------------------------------------------------------------
# the two runs
# ----------------------------------------------------------------------------------------------
def run_course(cfg) -> dict:
    """``train(cfg)``: every step's wall time, its phases from the trainer's own rows, the mean reply length."""
    from course_lib.rl import train
    t0 = time.perf_counter()
    hist = train(cfg, progress=False)
    rows = hist.rows[1:]
    step_s = [r["time/step_s"] for r in rows]
    phases = {"sample": [r["time/sample_s"] for r in rows], "targets": [r["time/targets_s"] for r in rows],
              "learn": [r["time/learn_s"] for r in rows]}
    phases["other"] = [t - sum(v[i] for v in phases.values()) for i, t in enumerate(step_s)]
    return {"step_s": step_s, "phases": phases, "mean_length": [r["len/all"] for r in rows],
            "reward": [r["reward/mean"] for r in rows], "grad_norm": [r["grad/norm"] for r in rows],
            "timed": list(range(1, len(rows) - 1)), "wall_s": time.perf_counter() - t0}


def run_trl(cfg) -> dict:
    """TRL's GRPOTrainer for ``cfg.steps`` steps on a fresh copy of the model: every step's wall time (from
    one step's start to the next one's), its phases, the mean reply length."""
    t0 = time.perf_counter()
    chat = lm.load("fp32")
    data = dataset(task.ChatAdditionTask(heldout_pairs=cfg.heldout_pairs).questions("train"))
    out = {"step_s": [], "mean_length": [], "reward": [], "grad_norm": []}

    class Clock(trl_toy.PhaseClock):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                out["mean_length"].append(logs["completions/mean_length"])
                out["reward"].append(logs["reward"])
                out["grad_norm"].append(logs["grad_norm"])

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = trl_trainer(cfg, chat.model, chat.tokenizer, data, cfg.steps, tmp, callbacks=[clock])
        clock.wrap(trainer)
        trainer.train()
    out["step_s"] = [b - a for a, b in zip(clock.begin, clock.begin[1:])]
    out.update(phases=clock.finish(out["step_s"]), timed=list(range(1, len(out["step_s"]))),
               wall_s=time.perf_counter() - t0)
    return out


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
    return {"median_step_s": statistics.median(run["step_s"][i] for i in idx), "timed_steps": len(idx),
            "all_steps": not run["timed"],
            "median_phase_s": {k: statistics.median(v[i] for i in idx) for k, v in run["phases"].items()},
            "mean_length": statistics.fmean(run["mean_length"][i] for i in idx)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=6, help="steps of each trainer (the timed ones: 2..steps-1)")
    p.add_argument("--prompts", type=int, default=8, help="prompts per step (P)")
    p.add_argument("--samples", type=int, default=4, help="samples per prompt (G)")
    p.add_argument("--tokens", type=int, default=48, help="new tokens at most per sample")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(OUT))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    folder = use_course_model()
    cfg = bench_config(a.steps, a.prompts, a.samples, a.tokens, a.threads, a.seed)
    env = trl_toy.environment(a.threads)
    print(f"{env['date']}: {env['cpu']}, {env['cpus']} CPUs, {a.threads} thread(s), torch {env['torch']}, "
          f"TRL {env['trl']}; load average {env['load_average_start']}; model {folder}", flush=True)
    print(f"{a.prompts} prompts x {a.samples} samples x <= {a.tokens} new tokens, {a.steps} step(s) each", flush=True)
    if env["load_average_start"] > 0.5:
        print(f"warning: load average {env['load_average_start']}: the machine is busy, the times will be too long "
              f"(and the ratio off); measure on an idle machine", flush=True)
    runs = {}
    for name, fn in (("course", run_course), ("TRL", run_trl)):
        run = fn(cfg)
        run["summary"] = s = summary(run)
        runs[name] = run
        ph = ", ".join(f"{k} {v:.2f}" for k, v in s["median_phase_s"].items())
        note = " (all steps: set-up and evaluation inside)" if s["all_steps"] else ""
        print(f"{name:>6}: {a.steps} step(s) in {run['wall_s']:.1f} s; median step {s['median_step_s']:.2f} s over "
              f"{s['timed_steps']} step(s){note}: {ph}; mean reply {s['mean_length']:.1f} tokens", flush=True)
    ratio = runs["TRL"]["summary"]["median_step_s"] / runs["course"]["summary"]["median_step_s"]
    print(f"TRL / course, median step time: {ratio:.2f}x")
    env["load_average_end"] = round(os.getloadavg()[0], 2)
    record = {"config": config_record(cfg), "trl_config": fw.trl_text(cfg), "trl_machine": MACHINE,
              "sizes": {"prompts": a.prompts, "samples": a.samples, "tokens": a.tokens, "steps": a.steps},
              "environment": env, "runs": runs, "step_time_ratio": ratio}
    trl_toy.write_record(record, a.out)


if __name__ == "__main__":
    main()
