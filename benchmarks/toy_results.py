"""Run the toy's comparisons (chapters 07, 08 and 11) over several seeds and store small JSON result files.

    python benchmarks/toy_results.py                       # chapter 07's comparisons, seeds 0 1 2, 200 steps
    python benchmarks/toy_results.py --only stale_sampler --seeds 0 1 --steps 300
    python benchmarks/toy_results.py --only gallery gallery_probes gallery_from_start    # chapter 08
    python benchmarks/toy_results.py --only diagnosis_heldout --out course_lib/judge/data   # exercise 13
    python benchmarks/toy_results.py --only gallery --fingerprints    # recompute fingerprints, train nothing
    python benchmarks/toy_results.py --only long_aggregation long_clip_higher long_passk long_entropy_bonus \
        long_lr_grid long_truncation long_adv_scaling               # chapter 11: the long-answer task
    python benchmarks/toy_results.py --size long_gpu --only long_aggregation --workers 1 --out /tmp/gpu
                                                                    # the same comparison at the GPU size

Each comparison stores its own seeds and steps (``Comparison.seeds`` / ``steps``: chapter 07's 0 1 2 and
200, chapter 08's gallery 240 steps, its probes 150, exercise 13's held-out runs seed 3 and 240 steps);
--seeds and --steps override.

Writes notebooks/data/toy_<comparison>.json, which the notebook loads and labels as precomputed, with
each label's fingerprint (``course_lib.toy.fingerprint``: its first seed's first steps in float64),
which tests/test_toy_stored.py checks on every machine.
A run whose config (seed and steps included) is already stored in one of the result files is
copied from there instead of trained again (training is deterministic for a config); --rerun
trains every run. The file's meta says which runs were copied. Until a comparison is complete its
finished runs are kept in toy_<comparison>.partial.json (removed once toy_<comparison>.json is
written), so an invocation that is stopped resumes where it was: the next one copies them.
Each worker process uses one torch thread (tiny matmuls gain nothing from more, and a busy
machine makes two threads much slower); --workers runs several runs at once (--workers 1: one
process, the runs one after the other in it).
"""
from __future__ import annotations

import argparse
import contextlib
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
        "is/zero_frac", "time/elapsed_s", "kl/penalty", "grad/norm", "entropy/t1",
        "len/truncated_frac", "reward/group_std"]


def run_sets(long_size: str = "long") -> dict:
    """Chapter 07's comparisons, chapter 08's run sets and the long-answer task's comparisons (at the
    size ``long_size``: "long", or "long_gpu" for a GPU), by name."""
    from course_lib.toy.diagnosis import RUN_SETS
    from course_lib.toy.experiments import COMPARISONS
    from course_lib.toy.long_answers import long_comparisons
    return {**COMPARISONS, **RUN_SETS, **long_comparisons(long_size)}


def _job(args):
    name, label, seed, steps, threads, long_size = args
    import torch
    torch.set_num_threads(threads)
    from course_lib.rl.config import make_config
    from course_lib.toy.experiments import thin, to_columns
    from course_lib.rl import train
    comp = run_sets(long_size)[name]
    cfg = comp.configs(make_config("smoke"), seed=seed, steps=steps)[label]
    h = train(cfg, progress=False)
    out = to_columns(thin(h, KEYS, every=2).to_json())
    if comp.passk:                      # right answers among n samples per held-out prompt, before and after
        from course_lib.toy.long_answers import passk_counts
        from course_lib.toy.warm_start import warm_start
        n, prompts = comp.passk
        out["passk"] = {"n": n, "prompts": prompts,
                        "base": passk_counts(cfg, warm_start(cfg)[0], n, prompts, seed=seed),
                        "trained": passk_counts(cfg, h.final_state, n, prompts, seed=seed)}
    return name, label, seed, out


def _key(config: dict) -> str:
    """A config as JSON, with fields added to RunConfig since it was stored filled in with their
    defaults (a run stored before a field existed ran with that field's default)."""
    from course_lib.rl.config import RunConfig
    from course_lib.rl.history import config_record
    return json.dumps({**config_record(RunConfig()), **config}, sort_keys=True)


def stored_runs(out_dir: str) -> dict:
    """{config as JSON: (stored run in columns form, "file, date made")} over the result files in
    ``out_dir`` made in this environment (``history.environment()``: torch build, CPU model, float-path
    variables): the same config gives the same run there, but another CPU's float rounding gives
    another warm start."""
    from course_lib.toy.experiments import to_columns
    from course_lib.rl.history import replays_here
    found = {}
    for fname in sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []:
        if fname.startswith("toy_") and fname.endswith(".json"):
            with open(os.path.join(out_dir, fname)) as f:
                raw = json.load(f)
            if not replays_here(raw.get("meta", {}).get("environment")):
                continue                       # another machine's float rounding, or a GPU's: not this run
            made = raw.get("meta", {}).get("finished", "?")
            for hists in raw.get("runs", {}).values():
                for h in hists:
                    found.setdefault(_key(h["config"]), (h if "columns" in h else to_columns(h),
                                                         f"{fname}, {made}"))
    return found


def main(argv=None) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from course_lib.toy.experiments import COMPARISONS as CHAPTER_07
    COMPARISONS = run_sets()                  # the names; the long ones' configs follow --size below
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="*", default=list(CHAPTER_07), choices=list(COMPARISONS))
    p.add_argument("--seeds", nargs="*", type=int, default=None, help="default: the comparison's own")
    p.add_argument("--steps", type=int, default=None, help="default: the comparison's own")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--size", choices=["long", "long_gpu"], default="long",
                   help="the long-answer comparisons' size: long (2 CPU cores, what is stored) or long_gpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=os.path.join("notebooks", "data"))
    p.add_argument("--rerun", action="store_true", help="train every run, even one already stored")
    p.add_argument("--fingerprints", action="store_true",
                   help="recompute the stored files' fingerprints only (after a change to the fingerprint "
                        "itself, not to what a config does); trains nothing")
    a = p.parse_args(argv)
    COMPARISONS = run_sets(a.size)
    os.makedirs(a.out, exist_ok=True)
    if a.fingerprints:
        from course_lib.rl.config import RunConfig
        from course_lib.toy.fingerprint import fingerprint
        for name in a.only:
            path = os.path.join(a.out, f"toy_{name}.json")
            with open(path) as f:
                raw = json.load(f)
            raw["meta"]["fingerprints"] = {label: fingerprint(RunConfig(**hists[0]["config"]))
                                           for label, hists in raw["runs"].items()}
            with open(path, "w") as f:
                json.dump(raw, f, separators=(",", ":"))
            print(f"{path}: {len(raw['runs'])} fingerprints recomputed", flush=True)
        return

    def seeds_of(name):
        return list(a.seeds) if a.seeds is not None else list(COMPARISONS[name].seeds)

    def steps_of(name):
        return a.steps if a.steps is not None else COMPARISONS[name].steps

    import torch

    from course_lib.rl.config import make_config
    from course_lib.toy.fingerprint import fingerprint
    from course_lib.rl.history import environment
    from course_lib.rl import config_record
    device = make_config("smoke").resolved_device()          # what the runs train on
    stored = {} if a.rerun else stored_runs(a.out)
    results: dict = {n: {label: {} for label in COMPARISONS[n].variants} for n in a.only}
    copied: dict = {n: [] for n in a.only}
    jobs = []
    for n in a.only:
        for s in seeds_of(n):
            for label, cfg in COMPARISONS[n].configs(make_config("smoke"), seed=s, steps=steps_of(n)).items():
                hit = stored.get(_key(config_record(cfg)))
                if hit is not None and (not COMPARISONS[n].passk or "passk" in hit[0]):
                    results[n][label][s] = hit[0]
                    copied[n].append(f"{label} / seed {s} (from {hit[1]})")
                else:
                    jobs.append((n, label, s, steps_of(n), a.threads, a.size))
    pending = {n: sum(j[0] == n for j in jobs) for n in a.only}
    t0 = time.time()
    command = "python benchmarks/toy_results.py " + " ".join(argv if argv is not None else sys.argv[1:])

    def write(name):
        first = COMPARISONS[name].configs(make_config("smoke"), seed=seeds_of(name)[0], steps=steps_of(name))
        meta = {"comparison": name, "claim": COMPARISONS[name].claim, "seeds": seeds_of(name),
                "steps": steps_of(name), "command": command.strip(), "threads_per_run": a.threads,
                "workers": a.workers, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
                           f"CPU capability {torch.backends.cpu.get_cpu_capability()}",
                "environment": environment(device),
                "fingerprints": {label: fingerprint(cfg) for label, cfg in first.items()},
                "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "copied_from_stored_files": copied[name],
                "note": "rows thinned to every 2nd step (and every evaluation), 4 significant digits"}
        runs = {label: [results[name][label][s] for s in seeds_of(name)] for label in results[name]}
        path = os.path.join(a.out, f"toy_{name}.json")
        with open(path, "w") as f:
            json.dump({"meta": meta, "runs": runs}, f, separators=(",", ":"))
        print(f"wrote {path} ({os.path.getsize(path) / 1024:.0f} KiB; {len(copied[name])} runs "
              f"copied from stored files)", flush=True)

    def partial_path(name):
        return os.path.join(a.out, f"toy_{name}.partial.json")

    def write_partial(name):
        """The comparison's finished runs so far, in a file stored_runs reads (this environment's)."""
        done = {label: list(by_seed.values()) for label, by_seed in results[name].items() if by_seed}
        with open(partial_path(name), "w") as f:
            json.dump({"meta": {"comparison": name, "environment": environment(device), "partial": True,
                                "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")},
                       "runs": done}, f, separators=(",", ":"))

    def finish(name):
        write(name)
        if os.path.exists(partial_path(name)):
            os.remove(partial_path(name))

    for name in a.only:
        if pending[name] == 0:
            finish(name)
    if not jobs:
        return
    with mp.get_context("spawn").Pool(a.workers) if a.workers > 1 else contextlib.nullcontext() as pool:
        for name, label, seed, hist in (pool.imap_unordered(_job, jobs) if pool else map(_job, jobs)):
            results[name][label][seed] = hist
            pending[name] -= 1
            print(f"[{time.time() - t0:7.1f}s] {name} / {label} / seed {seed}: "
                  f"held-out acc {hist['columns']['acc/heldout'][-1]:.3f}", flush=True)
            if pending[name] == 0:
                finish(name)
            else:
                write_partial(name)


if __name__ == "__main__":
    main()
