"""Chapter 08: runs that go wrong on purpose, and the labels a diagnosis returns.

Each failure is one deliberate misconfiguration of the toy trainer (``bad``), the monitor that shows it
first, its cause, and the knob that fixes it. ``GALLERY`` runs them side by side with a healthy run on
the same seeds (``benchmarks/toy_results.py --only gallery``, stored in notebooks/data/toy_gallery.json).
Exercise 13 grades a reader's ``diagnose(history)`` on other runs: other seeds and other strengths of
each misconfiguration, made by the same script into the judge's own data folder, never into the
reader's files.
"""
from __future__ import annotations

from dataclasses import dataclass

from .experiments import Comparison

# every run of the chapter and of the exercise: 32 prompts x 8 responses a step, 150 steps (about 20 s
# of one CPU core each), on top of the smoke size's policy and warm start
SIZE = dict(prompts_per_step=32, group_size=8, eval_every=25)
# a derived monitor: shaped reward minus exact accuracy, 0 when the reward is exactly the verifier's 0/1
REWARD_GAP = "reward - acc/sampled"

LABELS: dict[str, str] = {
    "healthy": "reward and held-out accuracy rise; entropy and KL move slowly",
    "entropy_collapse": "the sampling entropy is low and falls further; groups stop disagreeing; accuracy stalls",
    "length_blowup": "wrong answers grow to the length budget while the reward holds level or falls",
    "stale_sampler": "the sampler's log-probs disagree with the learner's (ratio tail); accuracy falls",
    "kl_runaway": "KL to the reference climbs past 2 nats while reward falls",
    "reward_hacking": "the reward climbs while the exact accuracy falls",
    "no_signal": "nearly every group's rewards are all equal from the first step: nothing to learn from",
}


# The monitors every run should watch (each defined once in metrics.METRICS) and what each warns of.
MONITORS: tuple[tuple[str, str], ...] = (
    ("reward/mean", "falls: something broke; rises while acc/sampled falls: the reward pays for something else"),
    ("acc/sampled", "the exact check on the same responses: the reward's yardstick"),
    ("acc/heldout", "prompts never trained on: the only number that says the policy got better"),
    ("entropy/mean", "low and falling while accuracy stalls: exploration is gone"),
    ("len/correct", "right answers: their length should stay put on this task"),
    ("len/wrong", "wrong answers growing to the budget: a length-dependent reward or loss"),
    ("kl/ref", "climbing fast: the policy is leaving the reference faster than it learns"),
    ("adv/pos_token_frac", "share of tokens pushed up; with 0/1 rewards about the accuracy of mixed groups"),
    ("groups/zero_signal_frac", "near 1 from the start: the prompts are too hard (or too easy) for the policy"),
    ("clip/low_frac", "0 with one gradient step per batch; rises with several steps or a stale pi_old"),
    ("clip/high_frac", "as clip/low_frac, for A > 0 and the upper bound"),
    ("mismatch/abs_logratio_p99", "float noise (~1e-6) when sampler and learner agree; a tail means they do not"),
)


@dataclass(frozen=True)
class Failure:
    label: str          # a key of LABELS
    bad: dict           # the misconfiguration (config overrides on top of the healthy run)
    curve: str          # the monitor that shows it first (a metrics key, or REWARD_GAP)
    cause: str          # one line
    knob: str           # what fixes it
    fix: dict | None = None   # a fixed run other than the healthy one, if the chapter shows it
    fix_name: str = ""


FAILURES: tuple[Failure, ...] = (
    Failure("entropy_collapse", dict(temperature=0.25), "entropy/mean",
            "sampling at T = 0.25: the groups' answers are nearly identical, so few groups carry signal",
            "sample at T = 1.0 (the healthy run)"),
    Failure("length_blowup", dict(length_bonus=0.05), "len/wrong",
            "a reward of 0.05 per token; the group std turns the small length differences inside "
            "all-wrong groups into full-size advantages",
            "drop the length term, or do not divide by the group std (Dr. GRPO)",
            fix=dict(length_bonus=0.05, loss="dr_grpo"), fix_name="length bonus + Dr. GRPO"),
    Failure("stale_sampler", dict(loss="ppo", mismatch="stale", stale_steps=4), "mismatch/abs_logratio_p99",
            "the sampler's weights are 4 optimiser steps old and pi_old is the learner's: the update "
            "is off-policy by an amount no clip is sized for",
            "a fresh sampler (the healthy run); TIS at cap 2 is shown too",
            fix=dict(loss="ppo", mismatch="stale", stale_steps=4, correction="tis"),
            fix_name="stale 4 + TIS"),
    Failure("kl_runaway", dict(lr=5e-3), "kl/ref",
            "learning rate 5e-3 with no KL term: each step moves the policy further than the "
            "batch can support",
            "lr 1e-3 (the healthy run); a KL term of 1.0 is shown too",
            fix=dict(lr=5e-3, kl_coef=1.0), fix_name="lr 5e-3 + KL 1.0"),
    Failure("reward_hacking", dict(verifier="contains"), REWARD_GAP,
            "the verifier accepts any answer that contains the sum's digits, so longer strings of "
            "digits earn reward", "the exact verifier (the healthy run)"),
    Failure("no_signal", dict(warm_steps=0), "groups/zero_signal_frac",
            "RL from a random policy: almost no response is right, so every group's rewards are 0",
            "a warm start (the healthy run); dynamic sampling cannot help when no group has signal"),
)

FAILURE = {f.label: f for f in FAILURES}


def _gallery_variants() -> dict:
    out = {"healthy": {}}
    for f in FAILURES:
        out[f.label] = f.bad
        if f.fix is not None:
            out[f.fix_name] = f.fix
    # the toy's "too easy" case: a warm start to 0.9 greedy accuracy
    out["warm start 0.9"] = dict(warm_target=0.9, warm_steps=3000)
    # DAPO's entropy-collapse mechanism: a tight upper clip with 16 updates per batch, against the
    # symmetric clip with the same updates (lr 2.5e-4: at 1e-3 the tight-clip run fell to 0 accuracy)
    sixteen = dict(loss="ppo", epochs=4, minibatches=4, lr=2.5e-4)
    out["16 updates, clip 0.2 / 0.2"] = sixteen
    out["16 updates, clip 0.2 / 0.05"] = dict(sixteen, eps_high=0.05)
    return out


GALLERY = Comparison(
    claim="Each deliberate misconfiguration shows first in one monitor; the chapter shows its fix next "
          "to it (the healthy run, or a fixed run), and for two failures a remedy that is not enough.",
    metric="acc/heldout",
    keys=("acc/heldout", "reward/mean", "acc/sampled", "entropy/mean", "len/wrong", "kl/ref",
          "groups/zero_signal_frac", "mismatch/abs_logratio_p99"),
    base=dict(SIZE),
    steps=150,
    variants=_gallery_variants())

# Exercise 13's held-out runs: "true label / what differs". Other seeds (3 and 4) and other strengths
# than the gallery's; made into course_lib/judge/data/, never into notebooks/ or exercises/.
HELDOUT = Comparison(
    claim="Runs the reader has not seen, one true label each (the text before ' / ').",
    metric="acc/heldout",
    keys=GALLERY.keys,
    base=dict(SIZE),
    seeds=(3, 4),
    steps=150,
    variants={
        "healthy / grpo": {},
        "healthy / dapo": dict(loss="dapo"),
        "healthy / cispo": dict(loss="cispo"),
        "healthy / lr 7e-4": dict(lr=7e-4),
        "healthy / T 1.2": dict(temperature=1.2),
        "entropy_collapse / T 0.2": dict(temperature=0.2),
        "entropy_collapse / T 0.3": dict(temperature=0.3),
        "length_blowup / bonus 0.02": dict(length_bonus=0.02),
        "length_blowup / bonus 0.1": dict(length_bonus=0.1),
        "stale_sampler / 2 steps": dict(loss="ppo", mismatch="stale", stale_steps=2),
        "stale_sampler / 8 steps": dict(loss="ppo", mismatch="stale", stale_steps=8),
        "kl_runaway / lr 3e-3": dict(lr=3e-3),
        "kl_runaway / lr 4e-3": dict(lr=4e-3),
        "reward_hacking / lr 7e-4": dict(verifier="contains", lr=7e-4),
        "reward_hacking / lr 2e-3": dict(verifier="contains", lr=2e-3),
        "no_signal / cold start, T 0.7": dict(warm_steps=0, temperature=0.7),
        "no_signal / budget 2 tokens": dict(max_new_tokens=2),
    })

RUN_SETS = {"gallery": GALLERY, "diagnosis_heldout": HELDOUT}


def true_label(variant: str) -> str:
    """The label of a held-out variant name ("kl_runaway / lr 3e-3" -> "kl_runaway")."""
    return variant.split(" / ")[0]


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
                   persist: int = 5, floor: float = 1e-4) -> int | None:
    """The first step from which the seed mean of ``key`` over ``runs`` stays away from the healthy
    runs' seed mean for ``persist`` logged rows in a row, or None if it never does.

    "Away": the two means, each smoothed by a trailing mean over ``window`` rows, differ by more than
    ``k`` times the healthy runs' typical spread (median over steps of max - min between seeds), plus
    ``floor``. Both lists hold one History per seed, logged at the same steps.
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
    spreads = sorted(max(ref[s]) - min(ref[s]) for s in steps)
    threshold = k * spreads[len(spreads) // 2] + floor
    mean = lambda v: sum(v) / len(v)        # noqa: E731
    b = smooth([mean(bad[s]) for s in steps], window)
    r = smooth([mean(ref[s]) for s in steps], window)
    away = [abs(x - y) > threshold for x, y in zip(b, r)]
    for i in range(len(steps) - persist + 1):
        if all(away[i:i + persist]):
            return steps[i]
    return None
