"""GRPO on the real model, stored with seeds: the course's trainer (``rl.trainer.train``) trains
SmolLM2-135M-Instruct (``make_config("real")``) on the chat addition task, and each run is measured on the
held-out questions after training exactly as ``real_lm_task.py`` measured the model before it.

    .venv/bin/python benchmarks/real_lm_grpo.py                  # every missing run -> notebooks/data/real_lm_grpo.json
    .venv/bin/python benchmarks/real_lm_grpo.py --runs grpo/0    # one run

The runs (``PLAN``, in the order they are made):
- ``grpo``, seeds 0-2: GRPO's loss with its sequence-mean aggregation, at the chapter's lr 2e-5;
- ``token_sum``, seeds 0-2: the same with Dr. GRPO's token-sum aggregation over a constant 48
  (``seq-mean-token-sum-norm``), the pair that asks whether the aggregation moves response length;
- ``lr_5e-6`` and ``lr_5e-5``, seed 0: GRPO at a quarter and at 2.5 times the learning rate, for the chapter's
  learning-rate question (the gradient-clip share and the KL beside the reward).
Each run is its own process (its peak memory is its own) and is stored the moment it ends; a run already stored
is skipped, so the set can be built over several sittings and an interrupted run costs only itself. A stored
run is replaced only with ``--force``, and a file is only extended for the same settings.

Per run: the trainer's rows (reward, the reply categories, lengths, truncation, entropy, clip fractions, KL to
the reference on evaluation steps, gradient norm, times), its wall time, sampling and learning tokens per
second, peak memory (the process's maximum resident set), the machine; after training, on the held-out
questions: 32 sampled replies per question (sampling seed 0, T = 1, 48 new tokens), so pass@k up to k = 32,
with the reply categories and every reply's text, and greedy decoding with its replies.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from real_lm_task import environment, run, summary                # noqa: E402

from course_lib import lm                                          # noqa: E402
from course_lib.lm.task import ChatAdditionTask                    # noqa: E402
from course_lib.rl.config import make_config                      # noqa: E402
from course_lib.rl.history import config_record                   # noqa: E402

OUT = ROOT / "notebooks" / "data" / "real_lm_grpo.json"
ARMS = {"grpo": {}, "token_sum": {"agg": "seq-mean-token-sum-norm"}, "lr_5e-6": {"lr": 5e-6}, "lr_5e-5": {"lr": 5e-5}}
PLAN = [f"{arm}/{seed}" for arm in ("grpo", "token_sum") for seed in (0, 1, 2)] + ["lr_5e-6/0", "lr_5e-5/0"]
EVAL = {"group_size": 32, "max_new_tokens": 48, "temperature": 1.0, "batch": 96, "sampling_seed": 0}


def arm_config(arm: str, seed: int, steps: int):
    return replace(make_config("real", seed=seed, steps=steps, num_threads=2), **ARMS[arm])


def heldout(chat: lm.ChatLM) -> dict:
    """Sampled replies (pass@1 to pass@32, the categories, the texts: ``real_lm_task.summary``) and greedy ones."""
    task = ChatAdditionTask()
    G, T = EVAL["group_size"], EVAL["max_new_tokens"]
    q = task.questions("heldout", group_size=G)
    answers = [a for a in q.answers for _ in range(G)]
    sampled = run(chat, q.prompts(chat), answers, batch=EVAL["batch"], seed=EVAL["sampling_seed"],
                  max_new_tokens=T, temperature=EVAL["temperature"])
    q1 = task.questions("heldout")
    greedy = run(chat, q1.prompts(chat), q1.answers, batch=EVAL["batch"], max_new_tokens=T, greedy=True)
    return {"sampled": summary(sampled, G, answers), "greedy": summary(greedy, 1, q1.answers)}


def measured_run(cfg, desc: str, *, on_step=None, measure_heldout: bool = True) -> dict:
    """Train ``cfg`` in this process (its peak memory is the run's own), then measure it on the held-out
    questions where it trained: the trainer's rows, wall time, tokens per second, peak memory, ``heldout``
    (left out, with ``after`` None, when ``measure_heldout`` is False), and the machine's 1-minute load average
    after each step (``load_1min``: above the 2 threads' 2, other work shared the cores and the times overstate a
    step's cost)."""
    from course_lib.rl.registry import policy_class
    from course_lib.rl import train
    torch.set_num_threads(2)
    loads = []

    def each_step(row):
        loads.append(round(os.getloadavg()[0], 2))
        if on_step is not None:
            on_step(row)
    t0 = time.perf_counter()
    hist = train(cfg, progress=True, desc=desc, on_step=each_step)
    train_s = time.perf_counter() - t0
    if measure_heldout:
        policy = policy_class(cfg.policy).for_config(cfg, torch.float32, cfg.resolved_device())   # LoRA too
        policy.load_state_dict(hist.final_state)
    t1 = time.perf_counter()
    after = heldout(policy.chat) if measure_heldout else None
    rows = hist.rows[1:]

    def tokens_per_s(part: str) -> float:      # every step's tokens over every step's seconds
        return (sum(r[f"speed/{part}_tok_s"] * r[f"time/{part}_s"] for r in rows)
                / sum(r[f"time/{part}_s"] for r in rows))
    return {"config": config_record(cfg), "rows": hist.rows, "train_seconds": round(train_s, 1),
            "eval_seconds": round(time.perf_counter() - t1, 1),
            "sample_tok_s": tokens_per_s("sample"), "learn_tok_s": tokens_per_s("learn"),
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "after": after, "environment": environment(), "load_1min": loads}


def store(out: Path, key: str, result: dict) -> None:
    """Add one run to the record in ``out`` and say how it went."""
    record = json.loads(out.read_text())
    record["runs"][key] = result
    out.write_text(json.dumps(record, indent=1) + "\n")
    said = f"{key}: {result['train_seconds'] / 60:.1f} min, peak {result['peak_rss_gb']:.2f} GB"
    if result["after"] is not None:
        s, k = result["after"]["sampled"], f"pass@{EVAL['group_size']}"
        said += (f", held-out pass@1 {s['pass@1']:.3f}, {k} {s[k]:.3f}, format {s['format']:.3f}, "
                 f"truncated {s['truncated']:.3f}")
    print(said, flush=True)


def run_missing(script: str, keys: list[str], out: Path, record: dict, force: bool, extra: list[str]) -> None:
    """Train each ``arm/seed`` in ``keys`` not yet in ``record`` (all of them with ``force``), each in a fresh
    process (``script --one ARM SEED`` + ``extra``) that stores its run in ``out`` the moment it ends (``record``
    is written there first when ``out`` does not exist yet)."""
    if not out.exists():
        out.write_text(json.dumps(record, indent=1) + "\n")
    stored = record["runs"]
    for key in keys:
        arm, seed = key.split("/")
        if key in stored and not force:
            print(f"{key}: stored, skipped")
            continue
        subprocess.run([sys.executable, script, "--one", arm, seed, "--out", str(out), *extra], check=True)


def open_record(out: Path, settings: dict, arm_config, steps: int, force: bool) -> dict:
    """The record in ``out`` (a new one holding ``settings`` if there is none, written once runs are asked for).
    Another script's settings are an error; so is a stored run whose config differs from what ``arm_config(arm,
    seed, steps)`` builds today, unless ``force`` (which trains the runs asked for again)."""
    record = json.loads(out.read_text()) if out.exists() else {"settings": settings, "runs": {}}
    if record["settings"] != settings:
        raise SystemExit(f"{out} holds runs of other settings ({record['settings']}); pass another --out")
    stale = [key for key, run in record["runs"].items()
             if run["config"] != config_record(arm_config(key.split("/")[0], int(key.split("/")[1]), steps))]
    if stale and not force:
        raise SystemExit(f"stored runs {stale} were made with another config than this script builds; "
                         f"pass --force with --runs to train them again")
    return record


def stored_runs_parser(doc: str, out, steps) -> argparse.ArgumentParser:
    """The options every stored-run script takes (its own add ``--runs`` and the like): ``--steps``, ``--force``,
    ``--list``, ``--out`` and the child process's hidden ``--one ARM SEED``."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--force", action="store_true", help="train stored runs again")
    p.add_argument("--list", action="store_true", help="print the plan and what is stored, and stop")
    p.add_argument("--out", default=None if out is None else str(out))
    p.add_argument("--one", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)   # the child process
    return p


def list_runs(keys: list[str], record: dict) -> None:
    """One line per run: stored (with its minutes) or missing."""
    for key in keys:
        run = record["runs"].get(key)
        print(f"{key:18s} " + (f"stored, {run['train_seconds'] / 60:.1f} min" if run else "missing"))


def one_run(arm: str, seed: int, steps: int, out: Path) -> None:
    """Train one (arm, seed), measure it, and store it in ``out`` (this process does only this)."""
    store(out, f"{arm}/{seed}", measured_run(arm_config(arm, seed, steps), f"{arm} seed {seed}"))


def main(argv=None) -> None:
    p = stored_runs_parser(__doc__, OUT, make_config("real").steps)
    p.add_argument("--runs", nargs="+", default=PLAN, choices=PLAN, metavar="ARM/SEED")
    a = p.parse_args(argv)
    out = Path(a.out)
    if a.one:
        return one_run(a.one[0], int(a.one[1]), a.steps, out)
    settings = {"steps": a.steps, "arms": {k: ARMS[k] for k in sorted(ARMS)}, "eval": EVAL,
                "base": config_record(make_config("real", steps=a.steps, num_threads=2))}
    record = json.loads(out.read_text()) if out.exists() else {}
    if record and record.get("settings") != settings:
        if not a.force:
            raise SystemExit(f"{out} holds runs of other settings; pass --force (they are dropped) or another --out")
        record = {}
    if not record:
        record = {"settings": settings, "runs": {}}
        out.write_text(json.dumps(record, indent=1) + "\n")
    if a.list:
        return list_runs(PLAN, record)
    run_missing(__file__, a.runs, out, record, a.force, ["--steps", str(a.steps)])
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
