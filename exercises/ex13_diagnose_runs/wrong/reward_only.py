"""Known-wrong: reads the reward curve alone."""
HINT = ("The reward alone cannot name a failure: it falls in several of them and rises in a hacked "
        "run. Read the monitor each failure shows first (the sampler/learner gap, the zero-signal "
        "share, the reward against the exact accuracy, wrong answers' length, KL, entropy).")


def diagnose(history):
    ys = history.series("reward/mean")[1]
    first, last = sum(ys[:5]) / 5, sum(ys[-10:]) / 10
    if last > first + 0.05:
        return "healthy"
    if last < 0.05:
        return "kl_runaway"
    return "entropy_collapse"
