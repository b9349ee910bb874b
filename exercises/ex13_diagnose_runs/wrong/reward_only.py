"""Known-wrong: reads the reward curve alone."""
HINT = ("The reward alone cannot name a failure: it falls in several of them and holds or rises in a "
        "hacked run. Read the monitor each failure moves first (the sampler/learner tail, the entropy "
        "at the sampling temperature against T = 1, the zero-signal share, the reward against the exact "
        "accuracy, KL).")


def diagnose(curves):
    ys = curves.series("reward/mean")[1]
    first, last = sum(ys[:5]) / 5, sum(ys[-10:]) / 10
    if last > first + 0.05:
        return "healthy"
    if last < 0.05:
        return "kl_runaway"
    return "low_temperature"
