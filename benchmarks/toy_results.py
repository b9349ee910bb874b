"""Run chapter 07's comparisons over several seeds and store small JSON result files.

    python benchmarks/toy_results.py                       # all comparisons, seeds 0 1 2, 200 steps
    python benchmarks/toy_results.py --only stale_sampler --seeds 0 1 --steps 300

Writes notebooks/data/toy_<comparison>.json, which the notebook loads and labels as precomputed.
Each worker process uses one torch thread (tiny matmuls gain nothing from more, and a busy
machine makes two threads much slower); --workers runs several runs at once.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from datetime import datetime, timezone

KEYS = ["acc/heldout", "acc/sampled", "reward/mean", "entropy/mean", "len/all", "len/correct",
        "len/wrong", "kl/ref", "clip/low_frac", "clip/high_frac", "clip_seq/low_frac",
        "clip_seq/high_frac", "ratio/mean", "ratio/max", "groups/zero_signal_frac",
        "adv/pos_token_frac", "samples/drawn", "mismatch/abs_logratio_p99", "is/weight_mean",
        "is/zero_frac", "time/elapsed_s"]


def _job(args):
    name, label, seed, steps, threads = args
    import torch
    torch.set_num_threads(threads)
    from course_lib.toy.config import make_config
    from course_lib.toy.experiments import COMPARISONS, thin, to_columns
    from course_lib.toy.trainer import train
    cfg = COMPARISONS[name].configs(make_config("smoke"), seed=seed, steps=steps)[label]
    h = train(cfg, progress=False)
    return name, label, seed, to_columns(thin(h, KEYS, every=2).to_json())


def main(argv=None) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from course_lib.toy.experiments import COMPARISONS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="*", default=list(COMPARISONS), choices=list(COMPARISONS))
    p.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=os.path.join("notebooks", "data"))
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    jobs = [(n, label, s, a.steps, a.threads) for n in a.only for s in a.seeds
            for label in COMPARISONS[n].variants]
    pending = {n: len(COMPARISONS[n].variants) * len(a.seeds) for n in a.only}
    results: dict = {n: {label: {} for label in COMPARISONS[n].variants} for n in a.only}
    t0 = time.time()
    command = "python benchmarks/toy_results.py " + " ".join(argv if argv is not None else sys.argv[1:])
    with mp.get_context("spawn").Pool(a.workers) as pool:
        for name, label, seed, hist in pool.imap_unordered(_job, jobs):
            results[name][label][seed] = hist
            pending[name] -= 1
            print(f"[{time.time() - t0:7.1f}s] {name} / {label} / seed {seed}: "
                  f"held-out acc {hist['columns']['acc/heldout'][-1]:.3f}", flush=True)
            if pending[name] == 0:
                meta = {"comparison": name, "claim": COMPARISONS[name].claim, "seeds": a.seeds,
                        "steps": a.steps, "command": command.strip(), "threads_per_run": a.threads,
                        "workers": a.workers, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                        "note": "rows thinned to every 2nd step (and every evaluation), 4 significant digits"}
                runs = {label: [results[name][label][s] for s in a.seeds] for label in results[name]}
                path = os.path.join(a.out, f"toy_{name}.json")
                with open(path, "w") as f:
                    json.dump({"meta": meta, "runs": runs}, f, separators=(",", ":"))
                print(f"wrote {path} ({os.path.getsize(path) / 1024:.0f} KiB)", flush=True)


if __name__ == "__main__":
    main()
