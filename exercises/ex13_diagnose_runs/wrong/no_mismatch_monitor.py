"""Known-wrong: never looks at the sampler/learner gap."""
HINT = ("A stale sampler looks like a too-high learning rate on the reward and KL curves. Check which monitor "
        "tells them apart: which one compares the sampler with the learner, and what does it read when the "
        "two share the same weights?")

LABELS = ("healthy", "low_temperature", "length_reward", "stale_sampler", "kl_runaway",
          "reward_hacking", "no_signal")
GAP = "reward - acc/sampled"


def first_step(steps, values, holds, persist: int = 3):
    """The first step from which ``holds(value)`` is true for ``persist`` logged rows in a row."""
    run = 0
    for i, v in enumerate(values):
        run = run + 1 if v == v and holds(v) else 0          # v == v: not NaN
        if run == persist:
            return steps[i - persist + 1]
    return None


def ratio(c, top: str, bottom: str):
    """Two monitors logged at the same steps, divided step by step."""
    (s, a), (_, b) = c.series(top), c.series(bottom)
    return s, [x / y if y else float("nan") for x, y in zip(a, b)]


def diagnose(curves) -> str:
    c = curves
    found = {}
    # the sampler is colder than the policy: entropy at the sampling temperature far below T = 1's
    found["low_temperature"] = first_step(*ratio(c, "entropy/mean", "entropy/t1"), lambda v: v < 0.6)
    # nothing left to learn from: almost every group's rewards are equal
    found["no_signal"] = first_step(*c.series("groups/zero_signal_frac"), lambda v: v > 0.9)
    # KL to the reference far above a healthy run's (a third of a nat)
    found["kl_runaway"] = first_step(*c.series("kl/ref"), lambda v: v > 1.0)
    # the reward pays for something besides the exact answer: with an exact 0/1 verifier and no
    # shaping the gap is exactly 0, so any gap that keeps coming back is a sign
    steps, gaps = c.series(GAP)
    opened = next((s for i, s in enumerate(steps) if gaps[i] > 0 and sum(g > 0 for g in gaps[i:i + 10]) >= 5), None)
    if opened is not None:
        # a reward term per token makes the gap a fixed multiple of the length; a lenient verifier
        # does not: compare the gap per token over the rows after it opened
        _, per_token = ratio(c, GAP, "len/all")
        after = [v for s, v in zip(steps, per_token) if s >= opened][:10]
        steady = min(after) > 0 and max(after) - min(after) < 0.2 * max(after)
        found["length_reward" if steady else "reward_hacking"] = opened
    fired = {label: step for label, step in found.items() if step is not None}
    if not fired:
        return "healthy"
    return min(fired, key=lambda label: (fired[label], LABELS.index(label)))
