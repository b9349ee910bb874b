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

from .runs import group_size, late_mean, series

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


@dataclass(frozen=True)
class Comparison:
    """Arm ``a`` against arm ``b`` on per-seed values: the gap between the means, the larger seed range, and
    ``direction``: "above", "below", "within the seeds' spread", or "no spread" (an arm with one seed)."""
    a: list[float]
    b: list[float]

    @property
    def gap(self) -> float:
        return mean(self.a) - mean(self.b)

    @property
    def spread(self) -> float:
        return max(max(v) - min(v) for v in (self.a, self.b))

    @property
    def direction(self) -> str:
        if min(len(self.a), len(self.b)) < 2:
            return "no spread"
        if abs(self.gap) <= self.spread:
            return "within the seeds' spread"
        return "above" if self.gap > 0 else "below"

    @property
    def every_pair(self) -> str | None:
        """"above" or "below" when seed i of ``a`` lies on that side of seed i of ``b`` for every common seed."""
        pairs = list(zip(self.a, self.b))
        if pairs and all(x > y for x, y in pairs):
            return "above"
        if pairs and all(x < y for x, y in pairs):
            return "below"
        return None


def compare(a_by_seed: dict[int, dict], b_by_seed: dict[int, dict], key: str, width: int = 10) -> Comparison:
    """Two arms' late means of ``key`` (``late_values``), compared by chapter 07's rule."""
    return Comparison(late_values(a_by_seed, key, width), late_values(b_by_seed, key, width))


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


def grad_clip_share(run: dict) -> float:
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
