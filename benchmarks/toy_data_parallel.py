"""The toy trainer on one process and on 2 gloo ranks (DDP), same size and seeds, side by side.

    python benchmarks/toy_data_parallel.py                  # smoke size, seeds 0 1 2, 200 steps
    python benchmarks/toy_data_parallel.py --seeds 0 --steps 50

One process runs ``train`` on one torch thread (one core); the data-parallel run is ``train_distributed``
with world_size 2 (one thread per rank, two cores: each rank samples half the prompts with its own seed
and learns on them, DDP averaging the gradients). One thread each, so both start from the same warm-start
weights (a warm start on two threads rounds differently and ends elsewhere). Writes
notebooks/data/data_parallel_runs.json (chapter 10 reads it): per seed and arm the held-out accuracy
curve and the wall time. Run it on an otherwise idle machine: the times are the point.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ARMS = {"1 process": dict(num_threads=1), "2 ranks (DDP)": dict(world_size=2, num_threads=1)}


def main(argv=None) -> None:
    import torch

    from course_lib.rl.config import make_config
    from course_lib.rl.history import environment
    from course_lib.rl import train, train_distributed
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--out", default=os.path.join("notebooks", "data", "data_parallel_runs.json"))
    a = p.parse_args(argv)
    runs: dict = {label: [] for label in ARMS}
    for seed in a.seeds:
        for label, kw in ARMS.items():                 # alternating, so a slow spell hits both
            cfg = replace(make_config("smoke", steps=a.steps, seed=seed), **kw)
            t0 = time.perf_counter()
            h = train_distributed(cfg) if cfg.world_size > 1 else train(cfg, progress=False)
            wall = time.perf_counter() - t0
            steps, acc = h.series("acc/heldout")
            runs[label].append({"seed": seed, "wall_s": round(wall, 1), "warm_start_s": round(h.warm_start_s, 1),
                                "rl_s": round(h.rows[-1]["time/elapsed_s"], 1),
                                "steps": steps, "acc/heldout": [round(x, 4) for x in acc]})
            print(f"seed {seed} {label}: {wall:.1f} s (warm start {h.warm_start_s:.1f} s), "
                  f"held-out {acc[0]:.3f} -> {acc[-1]:.3f}", flush=True)
    meta = {"steps": a.steps, "seeds": a.seeds, "size": "smoke",
            "command": "python benchmarks/toy_data_parallel.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}",
            "environment": environment(torch.device("cpu")),
            "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
