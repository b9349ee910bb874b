"""Benchmark of chapter 07's toy trainer: wall time, accuracy, throughput and FLOP utilisation.

    python benchmarks/toy_training.py                    # smoke (seed 0) and cpu (seeds 0 1 2)
    python benchmarks/toy_training.py --sizes smoke --seeds 0
    python benchmarks/toy_training.py --sizes gpu        # on a machine with CUDA
    python benchmarks/toy_training.py --sizes cpu --set group_size=16 prompts_per_step=32

    python benchmarks/toy_training.py --sizes gpu --seeds 0 --steps 50     # the GPU size's quick check
    python benchmarks/toy_training.py --sizes smoke cpu --steps 200 --compare-work   # the saved work, side by side
    python benchmarks/toy_training.py --sizes long --seeds 0      # the long-answer (scratchpad) task

Prints the device, the matmul peak it measures in the learner's arithmetic (dtype and size printed,
next to the device's specification peak where known), each size's FLOPs per token and per step, and
the KV cache's speed-up on that size's batch; then one table row per run: warm-start and RL wall
time, reward and greedy held-out accuracy at the start and the end, the time at which the size's
target was first met, sampling, learning and end-to-end tokens/s, and the model FLOP utilisation of
sampling, of learning and of whole steps (the no-grad forwards included) against the measured peak.
``--compare-work`` runs each seed twice, alternating: as configured, and with every forward the
trainer used to run (the reference model every step, a separate pi_old forward). Read its output;
no unit test times anything.
"""
from __future__ import annotations

import argparse
import ast
import os
import platform
import statistics
import sys
import time
from dataclasses import replace

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from course_lib.rl.config import make_config            # noqa: E402
from course_lib.toy.experiments import error_analysis   # noqa: E402
from course_lib.rl.policy import compute_precision             # noqa: E402
from course_lib.toy.policy import sample                      # noqa: E402
from course_lib.rl.registry import make_task             # noqa: E402
from course_lib.rl import build_model, stop_check_every, train   # noqa: E402
from course_lib.toy.warm_start import warm_start          # noqa: E402

TARGETS = {"smoke": ("gain", 0.3), "cpu": ("abs", 0.95), "gpu": ("abs", 0.95), "long": ("gain", 0.1),
           "long_gpu": ("gain", 0.1)}


# dense (no sparsity) specification peaks in FLOP/s, from NVIDIA's data sheets (SXM parts)
SPEC_PEAKS = {"H100": {"fp32": 67e12, "tf32": 494.7e12, "bf16": 989.4e12},
              "H200": {"fp32": 67e12, "tf32": 494.7e12, "bf16": 989.4e12},
              "A100": {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12}}
PEAK_SIZE = {"cuda": 8192, "cpu": 1024}     # a size that saturates the device (CPU: larger gains nothing)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(device: torch.device, precision: str, repeats: int = 5) -> tuple[float, int]:
    """Best-of-``repeats`` n x n matmul throughput in FLOP/s in the learner's arithmetic (float32,
    TF32 or bfloat16 operands), n = PEAK_SIZE of the device -> (FLOP/s, n)."""
    n = PEAK_SIZE.get(device.type, 1024)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    inner = 20 if device.type == "cpu" else 50
    best = float("inf")
    with compute_precision("fp32" if precision == "bf16" else precision, device):   # TF32 on or off
        for _ in range(3):
            a @ b
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            for _ in range(inner):
                a @ b
            sync(device)
            best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 * inner / best, n


def spec_peak(device: torch.device, precision: str) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((p[precision] for key, p in SPEC_PEAKS.items() if key in name), None)


def flops_per_step(cfg) -> dict:
    """Model FLOPs of one step of ``cfg`` at the full budget (every response max_new_tokens long):
    per token of the learner's forward + backward, and per step for sampling, learning and the
    no-grad forwards (pi_old when recomputed, pi_ref every step only with a KL term or the monitor)."""
    from course_lib.rl import reuses_loss_forward
    model = build_model(cfg, dtype=torch.float32).to("meta")
    ctx = make_task(cfg).prompt_len + cfg.max_new_tokens
    B, positions = cfg.batch_size, cfg.batch_size * (ctx - 1)
    per_tok = model.flops_per_token(ctx / 2)
    fwd = model.flops_per_token(ctx / 2, backward=False)
    passes = (0 if reuses_loss_forward(cfg) else 1) + int(cfg.kl_coef > 0 or cfg.monitor_kl_ref)
    return {"params": model.n_params(), "learn_per_token": per_tok,
            "sample": B * (ctx - 1) * fwd, "learn": positions * per_tok * cfg.epochs,
            "no_grad": passes * positions * fwd}


def cache_check(cfg, device) -> tuple[float, float]:
    """Sampling tokens/s of one batch of ``cfg`` (its model, its batch, its precision) with the KV cache
    and with the prefix re-run every step."""
    model = build_model(cfg).to(device)
    model.load_state_dict(warm_start(cfg, device)[0])
    prompts = make_task(cfg).prompts("train")[: cfg.batch_size].to(device)
    prompts = prompts.repeat((cfg.batch_size + len(prompts) - 1) // len(prompts), 1)[: cfg.batch_size]
    rates = []
    with compute_precision(cfg.sampler_precision or cfg.precision, device):
        for use_cache in (True, False):
            g = torch.Generator(device=device).manual_seed(0)
            kw = dict(generator=g, use_cache=use_cache, stop_check_every=stop_check_every(device))
            sample(model, prompts, cfg.max_new_tokens, **kw)                     # warm-up
            sync(device)
            t0 = time.perf_counter()
            roll = sample(model, prompts, cfg.max_new_tokens, **kw)
            sync(device)
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
    p.add_argument("--compare-work", action="store_true",
                   help="run each seed also with the forwards the trainer no longer runs (reference model every "
                        "step, separate pi_old forward): end-to-end tok/s side by side")
    a = p.parse_args(argv)
    overrides = {}
    for item in a.set:
        name, _, value = item.partition("=")
        overrides[name] = ast.literal_eval(value) if value[:1] in "0123456789-.[(" or value in ("True", "False", "None") else value
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    device = make_config("smoke", device=a.device).resolved_device()
    gpu = f", {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"device {device}{gpu}, {a.threads} thread(s); load average {os.getloadavg()[0]:.2f}")
    if overrides:
        print(f"config overrides: {overrides}")
    cfgs = {size: make_config(size, device=a.device, **({"steps": a.steps} if a.steps else {}), **overrides)
            for size in a.sizes}
    peaks = {}
    for size, cfg in cfgs.items():
        if cfg.precision not in peaks:
            peaks[cfg.precision], n = matmul_peak(device, cfg.precision)
            spec = spec_peak(device, cfg.precision)
            spec = f"; the specification's dense peak: {spec / 1e12:.0f} TFLOP/s" if spec else ""
            print(f"measured {cfg.precision} matmul peak ({n}^3, best of 5): "
                  f"{peaks[cfg.precision] / 1e9:,.1f} GFLOP/s{spec}")
    for size, cfg in cfgs.items():
        f = flops_per_step(cfg)
        kv, nokv = cache_check(cfg, device)
        print(f"{size}: {f['params'] / 1e6:.2f} M parameters (no embeddings), {cfg.batch_size} responses x "
              f"{make_task(cfg).prompt_len + cfg.max_new_tokens - 1} positions per step, {cfg.precision}; learner "
              f"{f['learn_per_token'] / 1e6:.2f} MFLOP per token (forward + backward); per step at the full "
              f"budget: sampling {f['sample'] / 1e9:.2f}, learning {f['learn'] / 1e9:.2f}, no-grad forwards "
              f"{f['no_grad'] / 1e9:.2f} GFLOP; one batch sampled {kv:,.0f} tok/s with the KV cache, "
              f"{nokv:,.0f} re-running the prefix ({kv / nokv:.2f}x)")
    print()
    head = (f"{'size':<6}{'seed':>5}{'work':>7}{'warm s':>8}{'RL s':>8}{'RL cpu s':>9}{'steps':>7}"
            f"{'reward 0->end':>15}{'held-out 0->end':>17}{'target at s (wall/cpu)':>23}{'sample tok/s':>14}"
            f"{'learn tok/s':>13}{'e2e tok/s':>11}{'MFU samp':>10}{'MFU learn':>11}{'MFU step':>10}")
    rows, finals = [], {}
    works = {"now": {}, "before": dict(monitor_kl_ref=True, old_logp_forward="separate")}
    for size in a.sizes:
        seeds = a.seeds if a.seeds is not None else ([0] if size == "smoke" else [0, 1, 2])
        for seed in seeds:
            for work in (("now", "before") if a.compare_work else ("now",)):
                cfg = replace(cfgs[size], seed=seed, **works[work])
                peak = peaks[cfg.precision]
                t0 = time.perf_counter()
                hist = train(cfg, progress=a.progress, desc=f"{size} seed {seed}")
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
                step_time = sum(r["time/step_s"] for r in steps)
                all_flops = sum(r["flops/sample"] + r.get("flops/learn", 0.0) + r.get("flops/targets", 0.0)
                                for r in steps)
                mfu_s = sum(r["flops/sample"] for r in steps) / s_time / peak
                mfu_l = sum(r.get("flops/learn", 0.0) for r in steps) / l_time / peak
                line = (f"{size:<6}{seed:>5}{work:>7}{hist.warm_start_s:>8.1f}{rl_s:>8.1f}{rl_cpu:>9.1f}"
                        f"{cfg.steps:>7}{f'{r0:.2f} -> {r1:.2f}':>15}{f'{acc0:.3f} -> {acc1:.3f}':>17}"
                        f"{('-' if hit is None else hit):>23}{s_tok / s_time:>14,.0f}{l_tok / l_time:>13,.0f}"
                        f"{s_tok / step_time:>11,.0f}{mfu_s:>10.1%}{mfu_l:>11.1%}"
                        f"{all_flops / step_time / peak:>10.1%}")
                rows.append(line)
                if work == "now":
                    finals.setdefault(size, []).append(acc1)
                print(head if len(rows) == 1 else "", line, sep="\n" if len(rows) == 1 else "", flush=True)
                if work == "now" and cfg.task == "addition":           # the breakdown reads addition's sums
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
