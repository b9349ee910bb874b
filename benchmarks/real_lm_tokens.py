"""Chapter 12's measurements on SmolLM2-135M-Instruct for several seeds, stored for the chapter's spreads.

    python benchmarks/real_lm_tokens.py                 # seeds 0 1 2 (minutes a seed on 2 idle cores)
    python benchmarks/real_lm_tokens.py --seeds 3 4     # more seeds, added to the file
    python benchmarks/real_lm_tokens.py --force         # measure stored seeds again

Each seed samples 8 single-digit addition questions x 4 replies at temperature 1 (``lm.tokens.SIZE``),
then measures what the chapter measures live for seed 0 (``lm.tokens.measure``): the bf16 and
bf16-with-fp32-head re-forwards against fp32, one AdamW step at three learning rates (the ratios of the
tokens it trained on, and of a held-back half: a step on one half of the groups, the ratios of the other),
the KL estimators on fresh replies against the exact KL, and the entropy against the temperature (the
T = 1 replies' positions re-tempered, and replies sampled at each temperature). Resumable: each finished
seed is written to notebooks/data/real_lm_tokens.json at once, and a seed already there is skipped
unless --force. The file records the machine (its float path) and each seed's wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join("notebooks", "data", "real_lm_tokens.json")


def main(argv=None) -> None:
    import torch

    from course_lib import lm
    from course_lib.lm import tokens
    from course_lib.rl.history import environment
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    p.add_argument("--out", default=OUT)
    p.add_argument("--force", action="store_true", help="measure seeds already stored again")
    a = p.parse_args(argv)
    stored = json.load(open(a.out)) if os.path.exists(a.out) else {"meta": {}, "seeds": {}}
    model = lm.load("fp32")
    others = {"bf16": lm.load("bf16"), "bf16 + fp32 head": lm.load("bf16", head_dtype="fp32")}
    for seed in a.seeds:
        if str(seed) in stored["seeds"] and not a.force:
            print(f"seed {seed}: stored already (--force measures it again)")
            continue
        t0 = time.perf_counter()
        res = tokens.measure(model, seed, others, progress=lambda s: print(
            f"  seed {seed}: {s} at {time.perf_counter() - t0:.0f} s", flush=True))
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        stored["seeds"][str(seed)] = res
        stored["meta"] = {"model": json.loads((lm.cache_dir() / lm.MANIFEST).read_text()),
                          "command": "python benchmarks/real_lm_tokens.py",
                          "threads": torch.get_num_threads(), "environment": environment(torch.device("cpu")),
                          "updated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
        with open(a.out, "w") as f:
            json.dump(stored, f, indent=1)
        print(f"seed {seed}: {res['wall_s']:.0f} s, stored in {a.out}", flush=True)


if __name__ == "__main__":
    main()
