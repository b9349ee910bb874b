"""Known-wrong: reads the reward curve alone."""
HINT = ("The reward alone cannot name a failure: it falls in several of them and holds or rises in a hacked "
        "run. Check which monitors your rules read: which one does each failure move first?")


def diagnose(curves):
    ys = curves.series("reward/mean")[1]
    first, last = sum(ys[:5]) / 5, sum(ys[-10:]) / 10
    if last > first + 0.05:
        return "healthy"
    if last < 0.05:
        return "kl_runaway"
    return "low_temperature"
