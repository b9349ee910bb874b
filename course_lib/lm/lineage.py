"""GRPO and its descendants on the real model, each batch learned in several optimiser steps
(``benchmarks/real_lm_lineage.py``'s record, chapter 14): the seed bands of the curves, the comparisons the
chapter's verdicts rest on, and what each loss does to the gradient of the tokens it clips.

A record is ``real_lm_grpo.py``'s kind (``lm.runs`` reads its runs, curves and held-out measurements), with the
gradient norm of every optimiser step (``grad_norms``, a list per RL step) added to each run.

An arm differs from another only when the gap between their means exceeds the larger of their seed ranges
(chapter 07's rule); with fewer than two seeds in an arm there is no range, and no comparison is made.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from statistics import mean

from ..toy.curves import against_values
from .runs import group_size, late_mean, series

# the runs' regime on top of make_config("real"): each batch in 2 epochs of 2 mini-batches (4 optimiser steps),
# pi_old from a separate forward before the first, lr 1e-5 (the pilot), the reference forward every step
REGIME = dict(epochs=2, minibatches=2, lr=1e-5, monitor_kl_ref=True)
NO_FORMAT = dict(format_weight=0.0)
# each arm's diff from the regime: the paper's setting where it fixes one (the loss functions' defaults), else
# GRPO's. CISPO's paper gives no upper bound: DAPO's 1 + 0.28 (its default here), and no lower bound
ARMS = {
    "grpo": {},
    "dapo": dict(loss="dapo"),
    "dr_grpo": dict(loss="dr_grpo"),
    "gspo": dict(loss="gspo"),
    "cispo": dict(loss="cispo"),
    "sapo": dict(loss="sapo"),
    "random": dict(verifier="random", **NO_FORMAT),                    # Shao et al.'s random reward
    "random_noclip": dict(verifier="random", eps_low=0.999, eps_high=1000.0, **NO_FORMAT),   # ... without the clip
    "format_only": dict(verifier="format", **NO_FORMAT),
}
LOSS_ARMS = ("grpo", "dapo", "dr_grpo", "gspo", "cispo", "sapo")
RANDOM_ARMS = ("random", "random_noclip")
LABELS = {"grpo": "GRPO", "dapo": "DAPO", "dr_grpo": "Dr. GRPO", "gspo": "GSPO", "cispo": "CISPO", "sapo": "SAPO",
          "random": "random reward, clip", "random_noclip": "random reward, no clip",
          "format_only": "format reward only"}

# what a loss's clip does to the gradient of a clipped token: PPO's clip removes it (the token's share is the
# clip fractions); GSPO's removes the whole reply's (a share of the replies); CISPO keeps a gradient weighted by
# the capped ratio and SAPO's gate has no edge, so neither removes any
REMOVES = {"ppo": "token", "grpo": "token", "dapo": "token", "dr_grpo": "token", "gspo": "reply", "cispo": None,
           "sapo": None}


def arm_config(arm: str, seed: int, steps: int | None = None):
    """The config of one arm and seed: ``make_config("real")``, the ``REGIME``, the arm's diff (``ARMS``)."""
    from ..rl.config import make_config
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {sorted(ARMS)}, got {arm!r}")
    steps = make_config("real").steps if steps is None else steps
    return make_config("real", seed=seed, steps=steps, num_threads=2, **REGIME, **ARMS[arm])


def seed_band(by_seed: dict[int, dict], key: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, lowest, highest) of a metric across an arm's seeds, at the steps every seed logged."""
    curves = [dict(zip(*series(run, key))) for run in by_seed.values()]
    if not curves:
        raise ValueError("by_seed holds no run")
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    vals = [[c[s] for c in curves] for s in steps]
    return steps, [mean(v) for v in vals], [min(v) for v in vals], [max(v) for v in vals]


def late_values(by_seed: dict[int, dict], key: str, width: int = 10) -> list[float]:
    """A metric's mean over the last ``width`` RL steps, one value per seed (in seed order)."""
    return [late_mean(*series(by_seed[s], key), width=width) for s in sorted(by_seed)]


def removed_share(run: dict) -> tuple[str | None, list[int], list[float]]:
    """What the run's clip removes the gradient of, per RL step: (the unit, "token" or "reply", or None when
    the loss removes none; steps; the share of the unit, averaged over the step's optimiser steps).

    PPO's clip: the tokens with A < 0 below 1 - eps_low or A > 0 above 1 + eps_high (``clip/low_frac`` +
    ``clip/high_frac``), over every response token of the mini-batch. GSPO's: the replies whose sequence ratio
    is clipped on their advantage's side (``clip_seq/*``), over the replies. CISPO and SAPO: none."""
    loss = run["config"]["loss"]
    if loss not in REMOVES:
        raise ValueError(f"loss must be one of {sorted(REMOVES)}, got {loss!r}")
    unit = REMOVES[loss]
    if unit is None:
        steps = series(run, "ratio/mean")[0]
        return None, steps, [0.0] * len(steps)
    prefix = "clip_seq" if unit == "reply" else "clip"
    steps, low = series(run, f"{prefix}/low_frac")
    _, high = series(run, f"{prefix}/high_frac")
    return unit, steps, [a + b for a, b in zip(low, high)]


def clipped_update_share(run: dict) -> float:
    """The share of a run's optimiser steps whose gradient norm before clipping exceeded ``grad_clip``."""
    norms = [n for step in run["grad_norms"] for n in step]
    if not norms:
        raise ValueError("the run holds no gradient norm")
    return sum(n > run["config"]["grad_clip"] for n in norms) / len(norms)


def top_reply_share(measure: dict, per_question: int | None = None) -> float:
    """How concentrated the sampled replies are: per held-out question, the share of its replies that are its
    most common reply (the text, stripped), averaged over the questions. ``per_question``: read only the first
    that many replies of each question (a measurement with more replies per question is compared with one with
    fewer on the same number, since the share of the most common of n falls as n grows)."""
    G = group_size(measure)
    n = G if per_question is None else per_question
    if not 1 <= n <= G:
        raise ValueError(f"per_question must be in 1..{G} (the replies per question), got {per_question!r}")
    texts = measure["texts"]
    shares = [Counter(t.strip() for t in texts[i:i + n]).most_common(1)[0][1] / n for i in range(0, len(texts), G)]
    return mean(shares)


def update_spread(run: dict) -> float:
    """How much the size of an update changes within a batch: per RL step, the spread (max - min) of its
    optimiser steps' gradient norms over their mean, averaged over the steps."""
    spreads = [(max(s) - min(s)) / mean(s) for s in run["grad_norms"] if len(s) > 1 and mean(s) > 0]
    if not spreads:
        raise ValueError("the run holds no RL step with two or more optimiser steps")
    return mean(spreads)


# a paper's claim read on the stored runs: ``arm`` against ``reference`` on ``measure`` (a row metric's late mean,
# "held-out pass@1" after training, "update spread", or ``RUN_MEAN``: the reward's mean over every step, the area
# under its curve, which is higher for the arm that learns faster), and the direction the claim predicts (+1
# above, -1 below, 0 a tie: "as well")
@dataclass(frozen=True)
class PaperClaim:
    text: str
    source: str
    arm: str
    reference: str
    measure: str
    expect: int


RUN_MEAN = "reward, mean over every step"
CLAIMS = (
    PaperClaim("Clip-Higher keeps the entropy from collapsing", "DAPO §3.1", "dapo", "grpo", "entropy/mean", +1),
    PaperClaim("GSPO clips far more yet trains as well", "GSPO §4-5", "gspo", "grpo", "held-out pass@1", 0),
    PaperClaim("CISPO, keeping the clipped tokens' gradient, learns faster", "MiniMax-M1 §3.1", "cispo", "dapo",
               RUN_MEAN, +1),
    PaperClaim("Dr. GRPO removes the length bias: wrong replies grow no longer", "Dr. GRPO §3", "dr_grpo", "grpo",
               "len/wrong", -1),
    PaperClaim("SAPO's soft gate gives steadier updates than a hard clip", "SAPO", "sapo", "grpo", "update spread",
               -1),
)


def claim_values(by_seed: dict[int, dict], measure: str, width: int = 10) -> list[float]:
    """An arm's per-seed values of a claim's measure."""
    if measure == "held-out pass@1":
        return [by_seed[s]["after"]["sampled"]["pass@1"] for s in sorted(by_seed)]
    if measure == "update spread":
        return [update_spread(by_seed[s]) for s in sorted(by_seed)]
    if measure == RUN_MEAN:
        return [mean(series(by_seed[s], "reward/mean")[1]) for s in sorted(by_seed)]
    return late_values(by_seed, measure, width)


def read_claim(arms: dict[str, dict[int, dict]], c: PaperClaim, width: int = 10) -> dict:
    """A claim on the runs: both arms' per-seed values, the gap, the bar it is weighed against (the larger of the
    two arms' seed ranges), chapter 07's "differs" (None with one seed) and the verdict: "reproduced" (the
    predicted direction, or a tie where a tie is predicted), "opposite", "inside the seeds' spread", or "one seed:
    not weighed"."""
    a, b = claim_values(arms[c.arm], c.measure, width), claim_values(arms[c.reference], c.measure, width)
    row = against_values({c.arm: a, c.reference: b}, c.reference)
    r = next(x for x in row if x["label"] == c.arm)
    differs = r["differs"] if min(len(a), len(b)) >= 2 else None
    if differs is None:
        verdict = "one seed: not weighed"
    elif differs == c.expect:
        verdict = "reproduced"
    elif differs == 0:
        verdict = "inside the seeds' spread"
    else:
        verdict = "opposite"
    return {"values": a, "reference": b, "gap": r["gap"], "spread": r["bar"],
            "differs": differs, "verdict": verdict}


def toy_verdicts(data_dir) -> dict[str, str]:
    """What chapters 07 and 11 found on the toy for each claim (by the claim's text), from their stored runs, by the
    same rule: the arm's direction against its reference, or "not run on the toy"."""
    import os

    from ..toy.curves import against
    from ..toy.experiments import load_results

    def direction(name: str, key: str, arm: str, ref: str) -> str:
        runs = load_results(os.path.join(data_dir, f"toy_{name}.json"))[1]
        d = next(r for r in against(runs, key, ref) if r["label"] == arm)["differs"]
        return {1: "above", -1: "below", 0: "tie"}[d]

    sym, high = "symmetric 0.2 / 0.2", "Clip-Higher 0.2 / 0.28"
    return {
        CLAIMS[0].text: (f"entropy: ch. 07 {direction('clip_higher', 'entropy/mean', high, sym)}, "
                         f"ch. 11 {direction('long_clip_higher', 'entropy/mean', high, sym)}"),
        CLAIMS[1].text: ("held-out accuracy, 4 updates a batch: ch. 07 "
                         + direction("multi_step", "acc/heldout", "GSPO, exact pi_old", "PPO, exact pi_old")),
        CLAIMS[2].text: ("held-out accuracy, 4 updates a batch, against PPO's clip: ch. 07 "
                         + direction("multi_step", "acc/heldout", "CISPO, exact pi_old", "PPO, exact pi_old")),
        CLAIMS[3].text: ("wrong answers' length: ch. 11 "
                         + direction("long_aggregation", "len/wrong", "Dr. GRPO (constant, no std)",
                                     "seq-mean-token-mean (GRPO)")),
        CLAIMS[4].text: "not run on the toy with several updates (chapter 05 draws the gate)",
    }
