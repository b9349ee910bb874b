"""Comparisons on the long-answer task (``toy.scratchpad``, size "long"), where a response has room
to change its length under RL. ``benchmarks/toy_results.py --only NAME`` stores them as
notebooks/data/toy_NAME.json like chapter 07's; chapter 11 reads them.

``passk_counts`` samples n answers per held-out prompt from a policy: what chapter 11's pass@k
curves are computed from (``course_lib.passk``), for the warm-start policy and a trained one.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from ..rl.config import SIZES, RunConfig
from .experiments import Comparison


# the learning-rate grid: every combination of these, 3 seeds each
GRID_LR, GRID_WARMUP, GRID_CLIP = (1e-3, 3e-3), (0, 20), (0.1, 1.0)


def grid_label(lr: float, warmup: int, clip: float) -> str:
    return f"lr {lr:g}, warm-up {warmup}, clip {clip:g}"


def long_comparisons(size: str = "long") -> dict[str, Comparison]:
    """The comparisons at a size of the long-answer task: "long" (what the chapter stores, 2 CPU cores)
    or "long_gpu" (the same comparisons for a GPU). Truncation runs with a budget 8 tokens below the
    size's, so that the longest style is often cut."""
    if size not in ("long", "long_gpu"):
        raise ValueError(f"size must be 'long' or 'long_gpu', got {size!r}")
    LONG = {k: v for k, v in SIZES[size].items() if k != "steps"}      # a Comparison sets the steps
    tight = SIZES[size]["max_new_tokens"] - 8
    return {
        "long_aggregation": Comparison(
            claim="With the per-response mean (GRPO) a long wrong answer is penalised less per token than "
                  "with the token mean (DAPO) or Dr. GRPO's constant, so wrong answers grow longer "
                  "(Dr. GRPO, Liu et al. 2025; DAPO §3.3).",
            metric="len/wrong",
            keys=("len/wrong", "len/correct", "acc/heldout", "len/truncated_frac", "entropy/mean"),
            base=dict(LONG, loss="grpo"),
            variants={"seq-mean-token-mean (GRPO)": dict(agg="seq-mean-token-mean"),
                      "token-mean (DAPO)": dict(agg="token-mean"),
                      "Dr. GRPO (constant, no std)": dict(loss="dr_grpo")},
            seeds=(0, 1, 2, 3, 4)),                 # five: the effect is about the size of the seed spread
        "long_clip_higher": Comparison(
            claim="With several updates per batch, Clip-Higher (eps_high 0.28) keeps the policy's entropy "
                  "higher than the symmetric clip 0.2 (DAPO §3.1, its entropy figure).",
            metric="entropy/mean",
            keys=("entropy/mean", "acc/heldout", "clip/high_frac", "clip/low_frac", "len/all"),
            base=dict(LONG, loss="ppo", minibatches=4, lr=5e-4),
            variants={"symmetric 0.2 / 0.2": dict(eps_high=0.2),
                      "Clip-Higher 0.2 / 0.28": dict(eps_high=0.28)}),
        "long_passk": Comparison(
            claim="RL raises pass@1 but not pass@k at large k: the warm-start policy's pass@k catches up "
                  "with the trained one's as k grows (Yue et al. 2025); a pass@k advantage (verl "
                  "grpo_passk) trades pass@1 for pass@k.",
            metric="acc/heldout",
            keys=("acc/heldout", "entropy/mean", "len/all"),
            base=dict(LONG, loss="grpo"),
            variants={"GRPO": dict(),
                      "GRPO loss, pass@k advantage": dict(adv_estimator="passk")},
            passk=(256, 64)),
        "long_entropy_bonus": Comparison(
            claim="An entropy bonus (the loss minus c times the entropy) keeps the policy's entropy up; "
                  "too large a coefficient costs accuracy.",
            metric="entropy/mean",
            keys=("entropy/mean", "acc/heldout", "len/all"),
            base=dict(LONG, loss="grpo"),
            variants={f"entropy_coef {c:g}": dict(entropy_coef=c) for c in (0.0, 0.003, 0.01, 0.03)}),
        "long_lr_grid": Comparison(
            claim="The learning rate matters most; a warm-up matters at a high learning rate; with Adam, "
                  "clipping the gradient norm barely matters (Adam divides the scale out).",
            metric="acc/heldout",
            keys=("acc/heldout", "grad/norm", "entropy/mean", "len/all"),
            base=dict(LONG, loss="grpo"),
            variants={grid_label(lr, w, c): dict(lr=lr, warmup_steps=w, grad_clip=c)
                      for lr in GRID_LR for w in GRID_WARMUP for c in GRID_CLIP}),
        "long_truncation": Comparison(
            claim="With a budget the longest traces exceed, DAPO's soft overlong penalty shortens answers "
                  "and masking truncated responses out of the loss removes their false penalty; "
                  "with neither, truncated responses count as wrong (DAPO §3.4).",
            metric="len/truncated_frac",
            keys=("len/truncated_frac", "acc/heldout", "len/all", "len/correct"),
            base=dict(LONG, loss="grpo", max_new_tokens=tight),
            variants={"neither": dict(),
                      "overlong penalty (cache 8)": dict(overlong_penalty=True, overlong_cache=8),
                      "mask truncated": dict(mask_truncated=True)}),
        "long_adv_scaling": Comparison(
            claim="With a reward of two terms (correct + 0.5 x well-formed), dividing by the group std "
                  "weighs a group whose answers differ only in format like one whose answers differ in "
                  "correctness; the batch std or no std keeps the reward's scale (Dr. GRPO; ScaleRL).",
            metric="acc/heldout",
            keys=("acc/heldout", "reward/mean", "acc/sampled", "entropy/mean"),
            base=dict(LONG, loss="grpo", format_weight=0.5),
            variants={"group std (GRPO)": dict(),
                      "batch std": dict(std_scope="batch"),
                      "no std": dict(std_scaling=False)}),
    }


LONG_COMPARISONS: dict[str, Comparison] = long_comparisons("long")


@torch.no_grad()
def passk_counts(cfg: RunConfig, state: dict, n: int = 256, n_prompts: int = 64, *, seed: int = 0,
                 chunk: int = 4096) -> list[int]:
    """For each of the first ``n_prompts`` held-out prompts, how many of ``n`` answers sampled at the
    config's temperature from the policy with weights ``state`` are right (the task's exact check)."""
    from ..rl.policy import compute_precision
    from .policy import sample
    from ..rl.registry import make_task
    from ..rl.model import build_model
    cfg = replace(cfg, device="cpu")
    task = make_task(cfg)
    model = build_model(cfg)
    model.load_state_dict(state)
    prompts = task.prompts("heldout")[:n_prompts].repeat_interleave(n, dim=0)       # [n_prompts * n, Lp]
    gen = torch.Generator().manual_seed(seed)
    right = []
    for start in range(0, len(prompts), chunk):
        p = prompts[start: start + chunk]
        with compute_precision(cfg.precision, p.device):
            roll = sample(model, p, cfg.max_new_tokens, temperature=cfg.temperature, generator=gen)
        right.append(task.verifiers["exact"](p, roll.responses))
    return torch.cat(right).view(n_prompts, n).sum(dim=1).long().tolist()


def load_passk(path) -> dict:
    """{label: [{"n", "prompts", "base", "trained"} per seed]} from a stored file of a comparison with
    ``passk`` (the right-answer counts per held-out prompt, before and after RL)."""
    import json
    with open(path) as f:
        raw = json.load(f)
    return {label: [h["passk"] for h in hists] for label, hists in raw["runs"].items()}


def passk_table(counts: dict, ks) -> dict:
    """{label: {"base": [{k: pass@k} per seed], "trained": [...]}} from ``load_passk``'s counts
    (``course_lib.passk.pass_at_k_curve``: the unbiased estimator, averaged over the prompts)."""
    from ..passk import pass_at_k_curve
    return {label: {when: [pass_at_k_curve(c[when], c["n"], ks) for c in seeds] for when in ("base", "trained")}
            for label, seeds in counts.items()}


def crossover_k(base: dict, trained: dict) -> int | None:
    """The smallest k at which the base policy's pass@k is at least the trained one's ({k: value}
    curves), or None when the trained policy stays ahead at every k measured."""
    return next((k for k in sorted(base) if base[k] >= trained[k]), None)


def verdict_checks(data_dir) -> list[tuple[str, str, bool]]:
    """The checks chapter 11's verdicts on sections 2 to 8 rest on, computed from the seven stored
    comparisons in ``data_dir``: [(section, check, holds)]. Chapter 11 runs it on the sweep made on one
    CPU and on the same sweep made on another, whose float rounding sends every run another way: a
    verdict whose check holds on one sweep only is no stronger than the seeds' spread."""
    import os

    from . import curves
    from .experiments import load_results

    def load(name):
        return load_results(os.path.join(data_dir, f"toy_{name}.json"))[1]

    def against(runs, key, ref):
        return {r["label"]: r for r in curves.against(runs, key, ref)}

    out = []
    runs = load("long_aggregation")
    grpo, tok, dr = LONG_COMPARISONS["long_aggregation"].variants
    wrong = against(runs, "len/wrong", grpo)
    three = {r["label"]: r for r in curves.against_values(
        {k: v[:3] for k, v in curves.seed_values(runs, "len/wrong").items()}, grpo)}
    out += [("2", "seeds 0-2 alone: wrong answers longest under the per-response mean",
             three[tok]["differs"] == three[dr]["differs"] == -1),
            ("2", "five seeds: wrong answers' lengths tie", wrong[tok]["differs"] == wrong[dr]["differs"] == 0)]

    runs = load("long_clip_higher")
    sym, high = LONG_COMPARISONS["long_clip_higher"].variants
    out += [("3", "entropy ties between eps_high 0.2 and 0.28", against(runs, "entropy/mean", sym)[high]["differs"] == 0),
            ("3", "the upper clip binds on under 1 % of tokens, every seed",
             max(curves.seed_values(runs, "clip/high_frac")[sym]) < 0.01)]

    tab = passk_table(load_passk(os.path.join(data_dir, "toy_long_passk.json")), [1, 256])
    pg, pk = LONG_COMPARISONS["long_passk"].variants
    base, trained, passk_arm = tab[pg]["base"], tab[pg]["trained"], tab[pk]["trained"]
    out += [("4", "GRPO raises pass@1, every seed", all(t[1] > b[1] for t, b in zip(trained, base))),
            ("4", "the warm start's pass@256 reaches GRPO's, every seed",
             all(b[256] >= t[256] for t, b in zip(trained, base))),
            ("4", "grpo_passk ends below the warm start at pass@256, every seed",
             all(p[256] < b[256] for p, b in zip(passk_arm, base))),
            ("4", "grpo_passk ends below the warm start at pass@1, every seed",
             all(p[1] < b[1] for p, b in zip(passk_arm, base)))]

    runs = load("long_entropy_bonus")
    arms = list(LONG_COMPARISONS["long_entropy_bonus"].variants)
    ent, acc = curves.seed_values(runs, "entropy/mean"), against(runs, "acc/heldout", arms[0])
    out += [("5", "entropy rises with the coefficient, every seed",
             all(ent[a][s] < ent[b][s] for a, b in zip(arms, arms[1:]) for s in range(len(ent[a])))),
            ("5", "held-out accuracy ties with no bonus at every coefficient",
             all(acc[a]["differs"] == 0 for a in arms[1:])),
            ("5", "every coefficient below no bonus in mean accuracy", all(acc[a]["gap"] < 0 for a in arms[1:]))]

    runs = load("long_lr_grid")
    levels = {grid_label(lr, w, c): {"lr": lr, "warm-up": w, "max_grad_norm": c}
              for lr in GRID_LR for w in GRID_WARMUP for c in GRID_CLIP}
    low = {k: {f: v for f, v in lv.items() if f != "lr"} for k, lv in levels.items() if lv["lr"] == GRID_LR[0]}
    clip = {e["factor"]: e for e in curves.factor_effects({k: runs[k] for k in low}, "acc/heldout", low)}
    at20 = {k: [curves.value_at(h, "acc/heldout", "step", 20) for h in runs[k]] for k in low}
    final = curves.seed_values(runs, "acc/heldout")
    out += [("6", "at lr 3e-3 every run ends below 0.05 held-out accuracy",
             all(v < 0.05 for k, lv in levels.items() if lv["lr"] == GRID_LR[1] for v in final[k])),
            ("6", "at lr 1e-3 a 20-step warm-up is ahead at step 20, every pair",
             all(b > a for k, lv in low.items() if lv["warm-up"] == 0
                 for a, b in zip(at20[k], at20[grid_label(GRID_LR[0], 20, lv["max_grad_norm"])]))),
            ("6", "max_grad_norm 0.1 against 1.0 moves final accuracy both ways",
             not clip["max_grad_norm"]["consistent"])]

    runs = load("long_truncation")
    neither, pen, mask = LONG_COMPARISONS["long_truncation"].variants
    first = {k: [curves.window_mean(h, "len/truncated_frac", first=20) for h in hs] for k, hs in runs.items()}
    acc = against(runs, "acc/heldout", neither)
    out += [("7", "overlong penalty: least truncation over the first 20 steps, every seed",
             all(p < min(n, m) for p, n, m in zip(first[pen], first[neither], first[mask]))),
            ("7", "final held-out accuracy ties across the three arms", acc[pen]["differs"] == acc[mask]["differs"] == 0)]

    runs = load("long_adv_scaling")
    gs, bs, ns = LONG_COMPARISONS["long_adv_scaling"].variants
    acc = against(runs, "acc/heldout", gs)
    out += [("8", "the batch std ends below the group std, beyond both seed ranges", acc[bs]["differs"] == -1),
            ("8", "no std ties with the group std", acc[ns]["differs"] == 0)]
    return out
