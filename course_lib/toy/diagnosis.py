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

# every run of the chapter and of the exercise: 150 steps of 32 prompts x 8 responses (about 20 s
# of one CPU core each), on top of the smoke size's policy and warm start
SIZE = dict(prompts_per_step=32, group_size=8, eval_every=25)
STEPS = 150

LABELS: dict[str, str] = {
    "healthy": "reward and held-out accuracy rise; entropy and KL move slowly",
    "entropy_collapse": "the sampling entropy is low and falls further; groups stop disagreeing; accuracy stalls",
    "length_blowup": "wrong answers grow to the length budget while the reward holds level or falls",
    "stale_sampler": "the sampler's log-probs disagree with the learner's (ratio tail); accuracy falls",
    "kl_runaway": "KL to the reference climbs past 2 nats while reward falls",
    "reward_hacking": "the reward climbs while the exact accuracy falls",
    "no_signal": "nearly every group's rewards are all equal from the first step: nothing to learn from",
}


@dataclass(frozen=True)
class Failure:
    label: str          # a key of LABELS
    bad: dict           # the misconfiguration (config overrides on top of the healthy run)
    curve: str          # the monitor that shows it first
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
    Failure("reward_hacking", dict(verifier="contains"), "reward/mean",
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
    return out


GALLERY = Comparison(
    claim="Each deliberate misconfiguration shows first in one monitor, and its fix brings that "
          "monitor back to the healthy run's.",
    metric="acc/heldout",
    keys=("acc/heldout", "reward/mean", "acc/sampled", "entropy/mean", "len/wrong", "kl/ref",
          "groups/zero_signal_frac", "mismatch/abs_logratio_p99"),
    base=dict(SIZE),
    variants=_gallery_variants())

# Exercise 13's held-out runs: "true label / what differs". Other seeds (3 and 4) and other strengths
# than the gallery's; made into course_lib/judge/data/, never into notebooks/ or exercises/.
HELDOUT = Comparison(
    claim="Runs the reader has not seen, one true label each (the text before ' / ').",
    metric="acc/heldout",
    keys=GALLERY.keys,
    base=dict(SIZE),
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
        "no_signal / cold start": dict(warm_steps=0),
        "no_signal / budget 2 tokens": dict(max_new_tokens=2),
    })

RUN_SETS = {"gallery": GALLERY, "diagnosis_heldout": HELDOUT}


def true_label(variant: str) -> str:
    """The label of a held-out variant name ("kl_runaway / lr 3e-3" -> "kl_runaway")."""
    return variant.split(" / ")[0]
