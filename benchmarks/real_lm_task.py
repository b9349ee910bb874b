"""Where the real model starts on its RL task: sampled pass@1 and pass@G (64 replies per question, so pass@k
for every k up to 64), greedy accuracy, the format rate, the reply categories, response lengths and truncation
of SmolLM2-135M-Instruct (Q4_1 dequantized to float32) on the chat addition task's held-out questions
(``course_lib.lm.task``). Every reply's text is kept.

    .venv/bin/python benchmarks/real_lm_task.py                    # writes notebooks/data/real_lm_task.json
    .venv/bin/python benchmarks/real_lm_task.py --seeds 0 --out /tmp/x.json   # a quicker look

Greedy decoding is measured once (it draws nothing) and keeps each question's verdict, which
``tests/test_lm_task.py`` re-checks on a slice. Each seed's result is stored as soon as it is measured and a
seed already in the file is skipped (``--force`` measures it, and greedy decoding, again), so an interrupted
run loses only the seed it was on. A stored file is only ever extended for the same settings; other settings
need another ``--out`` or ``--force``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_lib import lm                                       # noqa: E402
from course_lib.lm.runs import float_path                       # noqa: E402
from course_lib.lm.task import CATEGORIES, ChatAdditionTask, categories, exact, formatted   # noqa: E402

OUT = ROOT / "notebooks" / "data" / "real_lm_task.json"


def graded(model: lm.ChatLM, rollout: lm.Replies, answers: list[int]) -> dict:
    """Per reply: its text, exact, format, finished (an EOS within the budget), length; lists in batch order."""
    end = model.tokenizer.eos_token
    replies = [r.removesuffix(end) for r in model.responses_text(rollout)]
    return {"text": replies, "exact": [exact(r, a) for r, a in zip(replies, answers)],
            "format": [formatted(r) for r in replies],
            "finished": [float(not t) for t in rollout.truncated.tolist()],
            "length": rollout.lengths.tolist()}


def run(model: lm.ChatLM, prompts: list[list[int]], answers: list[int], *, batch: int, seed: int = 0,
        **sample_kw) -> dict:
    """Sample ``batch`` rows at a time (batch j seeded ``1000 * seed + j``) and grade every reply."""
    out: dict = {"text": [], "exact": [], "format": [], "finished": [], "length": []}
    for j, i in enumerate(tqdm(range(0, len(prompts), batch), desc="held-out batches", leave=False)):
        roll = model.sample(prompts[i:i + batch], seed=1000 * seed + j, **sample_kw)
        for k, v in graded(model, roll, answers[i:i + batch]).items():
            out[k] += v
    return out


def summary(g: dict, group_size: int, answers: list[int]) -> dict:
    """A held-out measurement: pass@1, pass@G, format, truncation, length, the share of each reply category
    (``lm.task.categories``), the right replies per question, and every reply's text, finished flag and length
    (``answers``: one per reply)."""
    n = len(g["exact"])
    mean = lambda xs: sum(xs) / len(xs)                        # noqa: E731
    groups = [g["exact"][i:i + group_size] for i in range(0, n, group_size)]
    ok_and_done = [e * f for e, f in zip(g["exact"], g["finished"])]
    cats = [categories(t, a, bool(f)) for t, a, f in zip(g["text"], answers, g["finished"])]
    return {"replies": n, "pass@1": mean(g["exact"]), "pass@1_finished": mean(ok_and_done),
            f"pass@{group_size}": mean([float(any(x)) for x in groups]), "format": mean(g["format"]),
            "truncated": 1 - mean(g["finished"]), "mean_length": mean(g["length"]),
            "categories": {c: mean([x[c] for x in cats]) for c in CATEGORIES},
            "correct_per_group": [sum(int(v) for v in x) for x in groups],
            "texts": g["text"], "finished": [int(f) for f in g["finished"]], "lengths": g["length"]}


def environment() -> dict:
    """The machine a record was made on: its float path (``lm.runs.float_path``, which ``same_float_path``
    compares), cores and threads, Python and the date."""
    return {**float_path(), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--group-size", type=int, default=64, help="replies per question (pass@k up to k = this)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=96, help="rows sampled at once")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--force", action="store_true", help="measure stored seeds and greedy decoding again")
    p.add_argument("--out", default=str(OUT))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    task = ChatAdditionTask()
    settings = {"task": "ChatAdditionTask()", "split": "heldout", "heldout_pairs": task.heldout_unordered,
                "questions": len(task.questions("heldout").texts),
                "group_size": a.group_size, "max_new_tokens": a.max_new_tokens, "temperature": a.temperature,
                "model": f"{lm.MODEL}, Q4_1 dequantized to float32", "dtype": "fp32"}
    out = Path(a.out)
    record = json.loads(out.read_text()) if out.exists() else {}
    if record and record.get("settings") != settings and not a.force:
        raise SystemExit(f"{out} holds other settings ({record.get('settings')}); pass --force or another --out")
    if not record or record.get("settings") != settings:
        record = {"settings": settings, "seeds": {}, "environment": environment()}
    model = lm.load("fp32")

    def save() -> None:
        out.write_text(json.dumps(record, indent=1) + "\n")

    if "greedy" not in record or a.force:
        q = task.questions("heldout", group_size=1)
        t0 = time.perf_counter()
        g = run(model, q.prompts(model), q.answers, batch=a.batch, max_new_tokens=a.max_new_tokens, greedy=True)
        record["greedy"] = {**summary(g, 1, q.answers), "seconds": round(time.perf_counter() - t0, 1),
                            "exact_per_question": g["exact"]}
        save()
        print(f"greedy: accuracy {record['greedy']['pass@1']:.3f}, format {record['greedy']['format']:.3f}, "
              f"truncated {record['greedy']['truncated']:.3f} ({record['greedy']['seconds']} s)", flush=True)
    q = task.questions("heldout", group_size=a.group_size)
    prompts, answers = q.prompts(model), [x for x in q.answers for _ in range(a.group_size)]
    for seed in a.seeds:
        if str(seed) in record["seeds"] and not a.force:
            print(f"seed {seed}: stored, skipped")
            continue
        t0 = time.perf_counter()
        g = run(model, prompts, answers, batch=a.batch, max_new_tokens=a.max_new_tokens,
                temperature=a.temperature, seed=seed)
        s = {**summary(g, a.group_size, answers), "seconds": round(time.perf_counter() - t0, 1)}
        record["seeds"][str(seed)] = s
        save()
        print(f"seed {seed}: pass@1 {s['pass@1']:.3f} (finished {s['pass@1_finished']:.3f}), "
              f"pass@{a.group_size} {s[f'pass@{a.group_size}']:.3f}, format {s['format']:.3f}, truncated "
              f"{s['truncated']:.3f}, mean length {s['mean_length']:.1f} ({s['seconds']} s)", flush=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
