"""Chapter 08: runs that go wrong mid-run, and the labels a diagnosis returns.

Each failure is one change of configuration that takes effect at an onset step (``RunConfig.changes``)
on top of a run that was learning: a learning-rate schedule step, a sampler that falls behind, a
verifier swapped for a lenient one, a reward term switched on, a cut response budget, a colder sampler.
Before the onset a failing run is the healthy run of the same seed, row for row, so the step at which
each monitor leaves it is measured, not decided by construction. ``GALLERY`` runs them beside the
healthy run and the fixes on the same seeds (``benchmarks/toy_results.py --only gallery``, stored in
notebooks/data/toy_gallery.json). Exercise 13 grades a reader's ``diagnose(curves)`` on other runs:
other seeds, strengths, onsets, healthy variants and runs where two things go wrong, under opaque
names, their labels kept apart (``heldout_labels``); the diagnosis sees only the monitors' series
(``Curves``), never a config or a name.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .. import frameworks
from .experiments import Comparison

# every run of the chapter and of the exercise: 32 prompts x 8 responses a step, 240 steps (about 40 s
# of one CPU core each), on top of the smoke size's policy and warm start
SIZE = dict(prompts_per_step=32, group_size=8, eval_every=20)
STEPS = 240
# a failure begins between 20 % and 40 % of the run: a hacked verifier or a length term switched on in
# a run that already learns takes 100 to 150 steps to take the accuracy down (measured on seed 0 with
# onset 50: exact accuracy 0 from step 200 and 180), so a later onset would end before the failure does
ONSET_RANGE = (0.2, 0.4)
# a derived monitor: shaped reward minus exact accuracy, 0 when the reward is exactly the verifier's 0/1
REWARD_GAP = "reward - acc/sampled"

LABELS: dict[str, str] = {
    "healthy": "reward and held-out accuracy rise; entropy and KL move slowly",
    "low_temperature": "the entropy at the sampling temperature drops while the entropy at T = 1 does "
                       "not; groups stop disagreeing; held-out accuracy stalls",
    "length_reward": "a reward term pays per token: a gap opens at once between reward and exact "
                     "accuracy, in proportion to the responses' length",
    "stale_sampler": "the sampler's log-probs disagree with the learner's (ratio tail); accuracy falls",
    "kl_runaway": "KL to the reference climbs fast while reward and accuracy fall",
    "reward_hacking": "the reward holds while the exact accuracy falls: the gap opens",
    "no_signal": "nearly every group's rewards become all equal: nothing left to learn from",
}


# The monitors every run should watch (each defined once in metrics.METRICS) and what each warns of.
MONITORS: tuple[tuple[str, str], ...] = (
    ("reward/mean", "falls: something broke; holds while acc/sampled falls: the reward pays for something else"),
    ("acc/sampled", "the exact check on the same responses: the reward's yardstick"),
    ("acc/heldout", "prompts never trained on: the only number that says the policy got better"),
    ("reward/group_std", "the spread the advantage divides by; falls to 0 with the groups' signal"),
    ("entropy/mean", "drops: exploration is gone, or the sampler got colder (compare entropy/t1)"),
    ("entropy/t1", "the policy's own entropy at T = 1: apart from entropy/mean, the temperature did it"),
    ("len/all", "every response's length; a reward that pays per token moves it with the reward"),
    ("len/correct", "right answers: their length should stay put on this task"),
    ("len/wrong", "wrong answers growing to the budget: a length-dependent reward or loss"),
    ("len/truncated_frac", "responses cut at the budget; a jump: the budget or the policy's answers changed"),
    ("kl/ref", "climbing fast: the policy is leaving the reference faster than it learns"),
    ("grad/norm", "a step change: the loss or the learning signal changed size"),
    ("adv/pos_token_frac", "share of tokens pushed up; with 0/1 rewards about the accuracy of mixed groups"),
    ("groups/zero_signal_frac", "near 1: the prompts are out of reach (or mastered), or the verifier broke"),
    ("clip/low_frac", "0 with one gradient step per batch; rises with several steps or a stale pi_old"),
    ("clip/high_frac", "as clip/low_frac, for A > 0 and the upper bound"),
    ("mismatch/abs_logratio_p99", "float noise (~1e-6) when sampler and learner agree; a tail means they do not"),
)
# what exercise 13's diagnose sees: the monitors' series and the reward gap, nothing else
GRADED_KEYS = tuple(k for k, _ in MONITORS) + (REWARD_GAP,)


@dataclass(frozen=True)
class Failure:
    label: str          # a key of LABELS
    change: dict        # the knobs that change at the onset (on top of the healthy run)
    curve: str          # the monitor the chapter expects to move first (a metrics key, or REWARD_GAP)
    cause: str          # one line
    knob: str           # what fixes it
    fixes: dict | None = None   # {name: whole-run overrides}: one knob each, on top of the failing run


FAILURES: tuple[Failure, ...] = (
    Failure("low_temperature", dict(temperature=0.25), "entropy/mean",
            "the sampling temperature dropped to 0.25: the groups' answers become nearly identical, so "
            "few groups carry signal", "sample at T = 1.0 (the healthy run)"),
    Failure("length_reward", dict(length_bonus=0.05), REWARD_GAP,
            "a reward of 0.05 per token switched on; the group std turns the small length differences "
            "inside all-wrong groups into full-size advantages",
            "drop the length term (the healthy run), or do not divide by the group std",
            fixes={"length bonus, no std division": dict(std_scaling=False)}),
    Failure("stale_sampler", dict(mismatch="stale", stale_steps=4), "mismatch/abs_logratio_p99",
            "the sampler fell 4 optimiser steps behind the learner and pi_old is the learner's: the "
            "update is off-policy by an amount no clip is sized for",
            "a fresh sampler (the healthy run); TIS at cap 2 is shown too",
            fixes={"stale 4 + TIS": dict(correction="tis")}),
    Failure("kl_runaway", dict(lr=5e-3), "kl/ref",
            "the learning rate stepped up from 1e-3 to 5e-3 with no KL term: each step moves the policy "
            "further than the batch can support",
            "lr 1e-3 (the healthy run); KL terms of 0.1, 0.3 and 1.0 are shown too",
            fixes={f"lr 5e-3 + KL {b}": dict(kl_coef=b) for b in (0.1, 0.3, 1.0)}),
    Failure("reward_hacking", dict(verifier="contains"), REWARD_GAP,
            "the verifier was swapped for one that accepts any answer containing the sum's digits, so "
            "longer strings of digits earn reward", "the exact verifier (the healthy run)"),
    Failure("no_signal", dict(max_new_tokens=2), "len/truncated_frac",
            "the response budget was cut from 6 tokens to 2: no answer of two or more digits fits, so "
            "nearly every group's rewards are all 0",
            "the budget the answers need (the healthy run); dynamic sampling cannot help when no group "
            "has signal"),
)

FAILURE = {f.label: f for f in FAILURES}
STALENESS = (1, 2, 4, 8)        # the stale-sampler failure at each lag (4 is the gallery's)


def draw_onset(rng: random.Random, steps: int = STEPS) -> int:
    """An onset step drawn uniformly from ONSET_RANGE of the run."""
    lo, hi = (round(f * steps) for f in ONSET_RANGE)
    return rng.randint(lo, hi)


_RNG = random.Random(8)
ONSETS = {f.label: draw_onset(_RNG) for f in FAILURES}      # the gallery's, one per failure


def failing(label: str, onset: int | None = None, **whole_run) -> dict:
    """The overrides of a failing run: ``whole_run`` from step 1, the failure's change at ``onset``."""
    f = FAILURE[label]
    return {**whole_run, "changes": {ONSETS[label] if onset is None else onset: dict(f.change)}}


def _gallery_variants() -> dict:
    out = {"healthy": {}}
    for f in FAILURES:
        out[f.label] = failing(f.label)
        for name, kw in (f.fixes or {}).items():
            out[name] = failing(f.label, **kw)
    onset = ONSETS["stale_sampler"]
    for lag in STALENESS:
        if lag != FAILURE["stale_sampler"].change["stale_steps"]:
            out[f"stale {lag}"] = {"changes": {onset: dict(mismatch="stale", stale_steps=lag)}}
    return out


GALLERY = Comparison(
    claim="Each failure begins mid-run and shows first in the monitors that name its cause; the "
          "chapter shows its fixes next to it, each one knob away from the failing run.",
    metric="acc/heldout",
    keys=("acc/heldout", "reward/mean", "acc/sampled", "entropy/mean", "len/wrong", "kl/ref",
          "groups/zero_signal_frac", "mismatch/abs_logratio_p99"),
    base=dict(SIZE),
    steps=STEPS,
    variants=_gallery_variants())


# Exercise 13's held-out runs: (true label, whole-run overrides, {knob: value} per change, in order).
# Other seeds (3 and 4), strengths, onsets and healthy variants than the gallery's; a run with two
# changes is labelled by the one that begins first. Names are opaque; labels: heldout_labels().
_HELDOUT_SPEC = (
    ("healthy", {}, ()),
    ("healthy", dict(loss="dapo", epochs=2), ()),                  # several updates: the clip binds
    ("healthy", dict(adv_estimator="rloo", lr=7e-4), ()),
    ("healthy", dict(temperature=1.2), ()),
    ("healthy", dict(kl_coef=0.1), ()),
    ("healthy", dict(loss="dr_grpo"), ()),
    ("healthy", {}, (dict(lr=5e-4),)),                             # a harmless schedule step down
    ("healthy", {}, (dict(temperature=0.8),)),                     # a slightly colder sampler
    ("low_temperature", {}, (dict(temperature=0.2),)),
    ("low_temperature", {}, (dict(temperature=0.3),)),
    ("low_temperature", dict(loss="dapo"), (dict(temperature=0.35),)),
    ("length_reward", {}, (dict(length_bonus=0.02),)),
    ("length_reward", {}, (dict(length_bonus=0.1),)),
    ("length_reward", dict(loss="dapo"), (dict(length_bonus=0.05),)),
    ("stale_sampler", {}, (dict(mismatch="stale", stale_steps=2),)),
    ("stale_sampler", {}, (dict(mismatch="stale", stale_steps=8),)),
    ("stale_sampler", dict(loss="ppo"), (dict(mismatch="stale", stale_steps=4),)),
    ("kl_runaway", {}, (dict(lr=4e-3),)),
    ("kl_runaway", {}, (dict(lr=8e-3),)),
    ("kl_runaway", dict(loss="dapo"), (dict(lr=6e-3),)),
    ("reward_hacking", {}, (dict(verifier="contains"),)),
    ("reward_hacking", dict(lr=2e-3), (dict(verifier="contains"),)),
    ("reward_hacking", dict(temperature=1.2), (dict(verifier="contains"),)),
    ("no_signal", {}, (dict(max_new_tokens=2),)),
    ("no_signal", dict(loss="dapo"), (dict(max_new_tokens=2),)),
    ("no_signal", {}, (dict(max_new_tokens=1),)),
    ("stale_sampler", {}, (dict(mismatch="stale", stale_steps=4), dict(lr=5e-3))),
    ("reward_hacking", {}, (dict(verifier="contains"), dict(temperature=0.25))),
    ("kl_runaway", {}, (dict(lr=6e-3), dict(length_bonus=0.05))),
    ("low_temperature", {}, (dict(temperature=0.25), dict(mismatch="stale", stale_steps=4))),
)


def _heldout_variants() -> tuple[dict, dict]:
    """({opaque name: overrides}, {opaque name: label}): onsets drawn per run, names in a shuffled
    order so that neither a name nor its position tells the label."""
    rng = random.Random(13)
    runs = []
    for label, whole, changes in _HELDOUT_SPEC:
        if changes:
            first = draw_onset(rng)
            second = min(first + rng.randint(15, 40), STEPS)     # a second change comes later
            whole = {**whole, "changes": dict(zip((first, second), changes))}
        runs.append((label, whole))
    rng.shuffle(runs)
    names = [f"run {i + 1:02d}" for i in range(len(runs))]
    return ({n: kw for n, (_, kw) in zip(names, runs)}, {n: lab for n, (lab, _) in zip(names, runs)})


_HELDOUT_VARIANTS, _HELDOUT_LABELS = _heldout_variants()

HELDOUT = Comparison(
    claim="Runs the reader has not seen; their labels are kept apart (diagnosis.heldout_labels()).",
    metric="acc/heldout",
    keys=GALLERY.keys,
    base=dict(SIZE),
    seeds=(3, 4),
    steps=STEPS,
    variants=_HELDOUT_VARIANTS)

# Two questions the gallery's failures leave open, run from step 0 for 150 steps: the toy's "too easy"
# case (a warm start to 0.9 greedy accuracy), and DAPO's entropy-collapse mechanism (a tight upper clip
# with 16 updates per batch against the symmetric clip with the same updates; lr 2.5e-4: at 1e-3 the
# tight-clip run fell to 0 accuracy).
_SIXTEEN = dict(loss="ppo", epochs=4, minibatches=4, lr=2.5e-4)
PROBES = Comparison(
    claim="A policy warm-started to 0.9 keeps signal in most groups; a tight upper clip with 16 updates "
          "per batch does not collapse the toy's entropy.",
    metric="acc/heldout",
    keys=("acc/heldout", "entropy/mean", "clip/high_frac", "groups/zero_signal_frac"),
    base=dict(prompts_per_step=32, group_size=8, eval_every=25),
    steps=150,
    variants={"warm start 0.9": dict(warm_target=0.9, warm_steps=3000),
              "16 updates, clip 0.2 / 0.2": _SIXTEEN,
              "16 updates, clip 0.2 / 0.05": dict(_SIXTEEN, eps_high=0.05)})

# Two of the gallery's changes made from step 0, where the warm-started policy gets about a quarter of its
# samples right (many groups all wrong), against the same changes mid-run; with the one-knob fix.
FROM_START = Comparison(
    claim="A length term or a lenient verifier switched on at step 0 takes the accuracy down within 150 "
          "steps; the same change mid-run (the gallery) had not done so 170 steps after its onset.",
    metric="acc/heldout",
    keys=("acc/heldout", "len/wrong", "reward/mean", "acc/sampled"),
    base=dict(SIZE),
    steps=150,
    variants={"length bonus from step 0": dict(length_bonus=0.05),
              "length bonus from step 0, no std division": dict(length_bonus=0.05, std_scaling=False),
              "lenient verifier from step 0": dict(verifier="contains")})

RUN_SETS = {"gallery": GALLERY, "gallery_probes": PROBES, "gallery_from_start": FROM_START,
            "diagnosis_heldout": HELDOUT}


def heldout_labels() -> dict:
    """{held-out run name: true label}; a run where two things go wrong has the label of the first."""
    return dict(_HELDOUT_LABELS)


class Curves:
    """One run's monitors as series, and nothing else: no config, no name, no knob.

    ``series(key)`` -> (steps, values), skipping steps where the monitor was not logged; ``first``,
    ``last`` and ``mean(key, last_n=...)`` read one number; ``keys`` lists the monitors."""

    def __init__(self, series: dict):
        self._series = {k: (list(s), list(v)) for k, (s, v) in series.items()}

    @classmethod
    def of(cls, h, keys=GRADED_KEYS) -> "Curves":
        """The graded monitors of History ``h`` (the reward gap computed from its rows)."""
        h = with_reward_gap(h)
        return cls({k: h.series(k) for k in keys})

    @property
    def keys(self) -> tuple:
        return tuple(self._series)

    def series(self, key: str) -> tuple[list, list]:
        if key not in self._series:
            raise KeyError(f"no monitor {key!r}; the monitors are {', '.join(self._series)}")
        s, v = self._series[key]
        return list(s), list(v)

    def first(self, key: str) -> float:
        return self.series(key)[1][0]

    def last(self, key: str) -> float:
        return self.series(key)[1][-1]

    def mean(self, key: str, last_n: int | None = None) -> float:
        v = self.series(key)[1]
        v = v[-last_n:] if last_n else v
        return sum(v) / len(v) if v else float("nan")


# ---- reading the curves ------------------------------------------------------------------------
def with_reward_gap(h):
    """A copy of History ``h`` whose rows also hold REWARD_GAP (shaped reward minus exact accuracy):
    any gap means the reward pays for something besides the exact answer."""
    import copy
    out = copy.deepcopy(h)
    for r in out.rows:
        if r.get("reward/mean") is not None and r.get("acc/sampled") is not None:
            r[REWARD_GAP] = r["reward/mean"] - r["acc/sampled"]
    return out


def by_step(hists: list, key: str) -> dict:
    """{step: [value per run]} at the steps every run logged."""
    per = [dict(zip(*h.series(key))) for h in hists]
    common = set.intersection(*(set(p) for p in per)) if per else set()
    return {s: [p[s] for p in per] for s in sorted(common)}


def departure_step(runs: list, healthy: list, key: str, *, k: float = 3.0, window: int = 5,
                   persist: int = 5, floor: float = 1e-4, spread_from: list | None = None) -> int | None:
    """The first step from which the seed mean of ``key`` over ``runs`` stays away from the healthy
    runs' seed mean for ``persist`` logged rows in a row, or None if it never does.

    "Away": the two means, each smoothed by a trailing mean over ``window`` rows, differ by more than
    ``k`` times the typical spread between the seeds of ``spread_from`` (default: ``healthy``; the
    median over steps of max - min), plus ``floor``. The lists hold one History per seed, logged at
    the same steps. ``departure_step([run], [healthy_run], key, spread_from=healthy)`` compares one
    seed with the healthy run of the same seed, which it equals up to a failure's onset.
    """
    if not runs or not healthy:
        raise ValueError("runs and healthy must each hold at least one History")
    if persist < 1 or window < 1:
        raise ValueError(f"persist and window must be >= 1, got {persist}, {window}")
    from .curves import smooth
    bad, ref = by_step(runs, key), by_step(healthy, key)
    steps = [s for s in ref if s in bad]
    if not steps:
        raise ValueError(f"no step where every run logged {key!r}")
    band = by_step(spread_from, key) if spread_from is not None else ref
    spreads = sorted(max(band[s]) - min(band[s]) for s in steps if s in band)
    threshold = k * spreads[len(spreads) // 2] + floor
    mean = lambda v: sum(v) / len(v)        # noqa: E731
    b = smooth([mean(bad[s]) for s in steps], window)
    r = smooth([mean(ref[s]) for s in steps], window)
    away = [abs(x - y) > threshold for x, y in zip(b, r)]
    for i in range(len(steps) - persist + 1):
        if all(away[i:i + persist]):
            return steps[i]
    return None


def departures(runs: list, healthy: list, key: str, **kw) -> list:
    """Per seed: the departure step of ``runs[i]`` from ``healthy[i]`` (the same seed), the band
    from the spread between all healthy seeds; None where it never departs."""
    if len(runs) != len(healthy):
        raise ValueError(f"one healthy run per seed: {len(runs)} runs, {len(healthy)} healthy")
    return [departure_step([r], [h], key, spread_from=healthy, **kw) for r, h in zip(runs, healthy)]


def lags(runs: list, healthy: list, keys, onset: int, **kw) -> dict:
    """{monitor: [steps after ``onset`` at which each seed departs from the healthy run of its seed,
    or None]} (``departures``); a monitor logged at too few steps in every run maps to None per seed."""
    out = {}
    for key in keys:
        try:
            steps = departures(runs, healthy, key, **kw)
        except ValueError:                     # not logged at a common step (e.g. len/correct at 0 right)
            steps = [None] * len(runs)
        out[key] = [None if s is None else s - onset for s in steps]
    return out


def first_movers(lag: dict) -> dict:
    """{monitor: in how many seeds it is among the first to depart} from ``lags``' output; a seed
    where no monitor departs counts for none."""
    n = len(next(iter(lag.values())))
    count = {k: 0 for k in lag}
    for i in range(n):
        moved = {k: v[i] for k, v in lag.items() if v[i] is not None}
        for k, v in moved.items():
            count[k] += v == min(moved.values())
    return count


def before_in_every_seed(lag: dict, a: str, b: str) -> bool:
    """Whether monitor ``a`` departs strictly before ``b`` in every seed (``b`` never departing counts
    as later)."""
    return all(x is not None and (y is None or x < y) for x, y in zip(lag[a], lag[b]))


def lag_cell(lags) -> str:
    """One failure's departure lags per seed as '4/6/-' ('-': the monitor never left the healthy run)."""
    return "/".join("-" if x is None else str(x) for x in lags)


def framework_names(key: str, framework: str) -> str:
    """The names ``framework`` ("verl", "TRL") logs a course monitor under, for a Markdown table cell
    ('—' where it logs none)."""
    m = frameworks.monitor_of(key)
    found = m.settings()[framework] if m else ()
    return "<br>".join(f"`{n}`" for n in found) or "—"
