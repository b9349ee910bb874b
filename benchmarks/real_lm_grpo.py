"""GRPO on the real model, stored with seeds: the course's trainer (``rl.trainer.train``) trains
SmolLM2-135M-Instruct (``make_config("real")``) on the chat addition task, and each run is measured on the
held-out questions after training exactly as ``real_lm_task.py`` measured the model before it.

    .venv/bin/python benchmarks/real_lm_grpo.py                  # every missing run -> notebooks/data/real_lm_grpo.json
    .venv/bin/python benchmarks/real_lm_grpo.py --arms grpo --seeds 0    # one run

Two arms, three seeds each: ``grpo`` (GRPO's loss, its sequence-mean aggregation) and ``token_sum`` (the same
with Dr. GRPO's token-sum aggregation over a constant 48, ``seq-mean-token-sum-norm``), the pair that asks
whether the aggregation moves response length. Each run is its own process (its peak memory is its own) and is
stored the moment it ends; a run already stored is skipped, so the set can be built over several sittings and
an interrupted run costs only itself. A stored run is replaced only with ``--force``, and a file is only
extended for the same settings.

Per run: the trainer's rows (reward, format, lengths, truncation, entropy, clip fractions, KL to the reference
on evaluation steps, gradient norm, times), its wall time, sampling and learning tokens per second, peak memory
(the process's maximum resident set), the machine; after training, held-out sampled pass@1 and pass@8 (sampling
seed 0, 8 replies per question, T = 1, 48 new tokens), the format rate and truncation, greedy accuracy, and the
greedy replies to the first held-out questions (the record also keeps the pretrained model's, for comparison).
"""
from __future__ import annotations

import argparse
import json
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
from course_lib.lm.task import SYSTEM, ChatAdditionTask            # noqa: E402
from course_lib.rl.config import make_config                      # noqa: E402
from course_lib.rl.history import config_record                   # noqa: E402

OUT = ROOT / "notebooks" / "data" / "real_lm_grpo.json"
ARMS = {"grpo": {}, "token_sum": {"agg": "seq-mean-token-sum-norm"}}
SHOWN = 6                     # held-out questions whose greedy replies are kept, before and after
EVAL = {"group_size": 8, "max_new_tokens": 48, "temperature": 1.0, "batch": 96, "sampling_seed": 0}


def arm_config(arm: str, seed: int, steps: int):
    return replace(make_config("real", seed=seed, steps=steps, num_threads=2), **ARMS[arm])


def greedy_texts(chat: lm.ChatLM) -> list[dict]:
    q = ChatAdditionTask().questions("heldout")
    prompts = [chat.chat_ids(t, SYSTEM) for t in q.texts[:SHOWN]]
    roll = chat.sample(prompts, max_new_tokens=EVAL["max_new_tokens"], greedy=True)
    end = chat.tokenizer.eos_token
    return [{"question": t, "answer": a, "reply": r.removesuffix(end)}
            for t, a, r in zip(q.texts, q.answers, chat.responses_text(roll))]


def heldout(chat: lm.ChatLM) -> dict:
    """Sampled pass@1 / pass@8, format, truncation (``real_lm_task``'s measure) and greedy accuracy."""
    task = ChatAdditionTask()
    G, T = EVAL["group_size"], EVAL["max_new_tokens"]
    q = task.questions("heldout", group_size=G)
    answers = [a for a in q.answers for _ in range(G)]
    sampled = run(chat, q.prompts(chat), answers, batch=EVAL["batch"], seed=EVAL["sampling_seed"],
                  max_new_tokens=T, temperature=EVAL["temperature"])
    q1 = task.questions("heldout")
    greedy = run(chat, q1.prompts(chat), q1.answers, batch=EVAL["batch"], max_new_tokens=T, greedy=True)
    return {"sampled": summary(sampled, G), "greedy": summary(greedy, 1), "greedy_replies": greedy_texts(chat)}


def one_run(arm: str, seed: int, steps: int, out: Path) -> None:
    """Train one (arm, seed), measure it, and store it in ``out`` (this process does only this)."""
    from course_lib.lm.policy import build_policy
    from course_lib.rl import train
    torch.set_num_threads(2)
    cfg = arm_config(arm, seed, steps)
    t0 = time.perf_counter()
    hist = train(cfg, progress=True, desc=f"{arm} seed {seed}")
    train_s = time.perf_counter() - t0
    policy = build_policy(device=cfg.resolved_device())           # evaluated where it trained
    policy.load_state_dict(hist.final_state)
    t1 = time.perf_counter()
    after = heldout(policy.chat)
    rows = hist.rows[1:]

    def tokens_per_s(part: str) -> float:      # every step's tokens over every step's seconds
        return (sum(r[f"speed/{part}_tok_s"] * r[f"time/{part}_s"] for r in rows)
                / sum(r[f"time/{part}_s"] for r in rows))
    result = {"config": config_record(cfg), "rows": hist.rows, "train_seconds": round(train_s, 1),
              "eval_seconds": round(time.perf_counter() - t1, 1),
              "sample_tok_s": tokens_per_s("sample"), "learn_tok_s": tokens_per_s("learn"),
              "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
              "after": after, "environment": environment()}
    record = json.loads(out.read_text())
    record["runs"][f"{arm}/{seed}"] = result
    out.write_text(json.dumps(record, indent=1) + "\n")
    s = after["sampled"]
    print(f"{arm} seed {seed}: {train_s / 60:.1f} min, held-out pass@1 {s['pass@1']:.3f}, pass@8 {s['pass@8']:.3f}, "
          f"format {s['format']:.3f}, truncated {s['truncated']:.3f}, peak {result['peak_rss_gb']:.2f} GB", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=make_config("real").steps)
    p.add_argument("--force", action="store_true", help="train stored runs again")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--one", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)   # the child process
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
        torch.set_num_threads(2)
        record = {"settings": settings, "runs": {}, "before_greedy_replies": greedy_texts(lm.load("fp32"))}
        out.write_text(json.dumps(record, indent=1) + "\n")
    for arm in a.arms:
        for seed in a.seeds:
            if f"{arm}/{seed}" in record["runs"] and not a.force:
                print(f"{arm} seed {seed}: stored, skipped")
                continue
            subprocess.run([sys.executable, __file__, "--one", arm, str(seed), "--steps", str(a.steps),
                            "--out", str(out)], check=True)
            record = json.loads(out.read_text())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
