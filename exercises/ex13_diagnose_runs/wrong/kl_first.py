"""Known-wrong: checks KL before the signs that name a cause."""
HINT = ("KL to the reference climbs in several failures, not only after a learning-rate step: a stale "
        "sampler, a hacked reward and a cut budget also carry the policy far away. Check the order in which "
        "your rules read the monitors: which signs name a cause, and which failure's sign begins first?")

GAP = "reward - acc/sampled"


def _end(c, key, n=10):
    return c.mean(key, last_n=n)


def diagnose(curves):
    c = curves
    if _end(c, "kl/ref") > 1.0:
        return "kl_runaway"
    if max(c.series("mismatch/abs_logratio_p99")[1]) > 0.05:
        return "stale_sampler"
    if _end(c, "groups/zero_signal_frac") > 0.9:
        return "no_signal"
    if _end(c, GAP) > 0.003:
        return "reward_hacking"
    if _end(c, "entropy/mean") < 0.6 * _end(c, "entropy/t1"):
        return "low_temperature"
    return "healthy"
