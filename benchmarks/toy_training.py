"""Benchmark of chapter 07's toy trainer: wall time, accuracy, throughput and FLOP utilisation.

    python benchmarks/toy_training.py                    # smoke (seed 0) and cpu (seeds 0 1 2)
    python benchmarks/toy_training.py --sizes smoke --seeds 0
    python benchmarks/toy_training.py --sizes gpu        # on a machine with CUDA
    python benchmarks/toy_training.py --sizes cpu --set group_size=16 prompts_per_step=32

Prints one table row per run: warm-start and RL wall time, reward and greedy held-out accuracy
at the start and the end, the time at which the size's target was first met, sampling and learning
tokens/s, and the model FLOP utilisation of sampling and of learning against a matmul peak this
script measures itself. Read its output; no unit test times anything.
"""
from __future__ import annotations

import argparse
import ast
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from course_lib.toy.config import make_config            # noqa: E402
from course_lib.toy.experiments import error_analysis   # noqa: E402
from course_lib.toy.policy import sample                 # noqa: E402
from course_lib.toy.task import AdditionTask             # noqa: E402
from course_lib.toy.trainer import build_model, train, warm_start   # noqa: E402

TARGETS = {"smoke": ("gain", 0.3), "cpu": ("abs", 0.95), "gpu": ("abs", 0.95)}


def matmul_peak(device: torch.device, n: int = 1024, repeats: int = 5) -> float:
    """Best-of-``repeats`` float32 n x n matmul throughput in FLOP/s on ``device``."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    inner = 20 if device.type == "cpu" else 200
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(inner):
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 * inner / best


def cache_check(cfg, device) -> tuple[float, float]:
    """Sampling tokens/s of one batch with the KV cache and with the prefix re-run every step."""
    model = build_model(cfg).to(device)
    model.load_state_dict(warm_start(cfg, device)[0])
    prompts = AdditionTask().prompts("train")[: cfg.batch_size].to(device)
    rates = []
    for use_cache in (True, False):
        g = torch.Generator(device=device).manual_seed(0)
        sample(model, prompts, cfg.max_new_tokens, generator=g, use_cache=use_cache)   # warm-up
        t0 = time.perf_counter()
        roll = sample(model, prompts, cfg.max_new_tokens, generator=g, use_cache=use_cache)
        if device.type == "cuda":
            torch.cuda.synchronize()
        rates.append(roll.responses.numel() / (time.perf_counter() - t0))
    return rates[0], rates[1]


def final_breakdown(hist, cfg) -> str:
    """Greedy held-out accuracy of the final policy by kind of sum, and how many of its errors
    RL can no longer see (all G samples wrong: a zero-signal group)."""
    ea = error_analysis(cfg, hist.final_state)
    parts = [f"{k} {acc:.3f} (n={n})" for k, (acc, n) in ea["by_kind"].items()]
    acc10, n10 = ea["units_ten"]
    return (", ".join(parts) + f"; units digits summing to exactly 10: {acc10:.3f} (n={n10})"
            f"; {ea['wrong']} wrong prompts, of which {ea['stuck']:.0%} have all "
            f"{cfg.group_size} samples at T = {cfg.temperature} wrong (no signal)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="*", default=["smoke", "cpu"], choices=sorted(TARGETS))
    p.add_argument("--seeds", nargs="*", type=int, default=None,
                   help="default: 0 for smoke, 0 1 2 for cpu and gpu")
    p.add_argument("--threads", type=int, default=2,
                   help="torch CPU threads (default 2: 1.6x faster than 1 on an idle 2-core machine; "
                        "on a busy one, 1 thread per run was faster)")
    p.add_argument("--device", default="auto")
    p.add_argument("--steps", type=int, default=None, help="override the size's step count (quick checks)")
    p.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                   help="override config fields, e.g. --set group_size=16 prompts_per_step=32")
    p.add_argument("--progress", action="store_true")
    a = p.parse_args(argv)
    overrides = {}
    for item in a.set:
        name, _, value = item.partition("=")
        overrides[name] = ast.literal_eval(value) if value[:1] in "0123456789-.[(" or value in ("True", "False", "None") else value
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    probe = make_config("smoke", device=a.device)
    device = probe.resolved_device()
    peak = matmul_peak(device)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"device {device}, {a.threads} thread(s); load average {os.getloadavg()[0]:.2f}")
    if overrides:
        print(f"config overrides: {overrides}")
    print(f"measured float32 matmul peak (1024^3, best of 5): {peak / 1e9:.1f} GFLOP/s")
    kv, nokv = cache_check(probe, device)
    print(f"sampling one smoke batch: {kv:,.0f} tok/s with the KV cache, {nokv:,.0f} tok/s re-running "
          f"the prefix ({kv / nokv:.2f}x)\n")
    head = (f"{'size':<6}{'seed':>5}{'warm s':>8}{'RL s':>8}{'RL cpu s':>9}{'steps':>7}{'reward 0->end':>15}"
            f"{'held-out 0->end':>17}{'target at s (wall/cpu)':>23}{'sample tok/s':>14}{'learn tok/s':>13}"
            f"{'MFU samp':>10}{'MFU learn':>11}")
    rows, finals = [], {}
    for size in a.sizes:
        seeds = a.seeds if a.seeds is not None else ([0] if size == "smoke" else [0, 1, 2])
        for seed in seeds:
            cfg = make_config(size, seed=seed, device=a.device, **({"steps": a.steps} if a.steps else {}),
                              **overrides)
            t0 = time.perf_counter()
            hist = train(cfg, progress=a.progress, desc=f"{size} seed {seed}")
            wall = time.perf_counter() - t0
            rl_s = hist.rows[-1]["time/elapsed_s"]
            acc0, acc1 = hist.first("acc/heldout"), hist.last("acc/heldout")
            rew = hist.series("reward/mean")[1]
            r0, r1 = statistics.mean(rew[:10]), statistics.mean(rew[-10:])   # first / last 10 steps
            kind, thr = TARGETS[size]
            goal = acc0 + thr if kind == "gain" else thr
            hit = next((r for r in hist.rows if r.get("acc/heldout", float("nan")) >= goal), None)
            hit = None if hit is None else f"{hit['time/elapsed_s']:.0f} / {hit['time/elapsed_cpu_s']:.0f}"
            rl_cpu = hist.rows[-1]["time/elapsed_cpu_s"]
            steps = hist.rows[1:]
            s_tok = sum(r["speed/sample_tok_s"] * r["time/sample_s"] for r in steps)
            s_time = sum(r["time/sample_s"] for r in steps)
            l_time = sum(r.get("time/learn_s", 0.0) for r in steps)
            l_tok = sum(r.get("speed/learn_tok_s", 0.0) * r.get("time/learn_s", 0.0) for r in steps)
            mfu_s = sum(r["flops/sample"] for r in steps) / s_time / peak
            mfu_l = sum(r.get("flops/learn", 0.0) for r in steps) / l_time / peak
            line = (f"{size:<6}{seed:>5}{hist.warm_start_s:>8.1f}{rl_s:>8.1f}{rl_cpu:>9.1f}{cfg.steps:>7}"
                    f"{f'{r0:.2f} -> {r1:.2f}':>15}{f'{acc0:.3f} -> {acc1:.3f}':>17}"
                    f"{('-' if hit is None else hit):>23}{s_tok / s_time:>14,.0f}"
                    f"{l_tok / l_time:>13,.0f}{mfu_s:>10.1%}{mfu_l:>11.1%}")
            rows.append(line)
            finals.setdefault(size, []).append(acc1)
            print(head if len(rows) == 1 else "", line, sep="\n" if len(rows) == 1 else "", flush=True)
            print(f"      final greedy accuracy by kind of sum: {final_breakdown(hist, cfg)}",
                  flush=True)
    print("\n" + head)
    print("\n".join(rows))
    for size, accs in finals.items():
        print(f"{size}: final held-out accuracy median over {len(accs)} seed(s) "
              f"{statistics.median(accs):.3f} ({', '.join(f'{x:.3f}' for x in accs)})")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other processes share the cores)")


if __name__ == "__main__":
    main()
