"""Known-wrong: checks KL before the signs that name a cause."""
HINT = ("KL to the reference climbs in several failures, not only when the learning rate is too "
        "high: a hacked reward and a length term also carry the policy far away. Check first the "
        "signs that name a cause (the reward against the exact accuracy, wrong answers' length), "
        "then KL.")


def _end(h, key, n=10):
    return h.mean(key, last_n=n)


def diagnose(history):
    h = history
    if max(h.series("mismatch/abs_logratio_p99")[1], default=0.0) > 0.1:
        return "stale_sampler"
    if sum(h.series("groups/zero_signal_frac")[1][:5]) / 5 > 0.9:
        return "no_signal"
    if _end(h, "kl/ref") > 2.0:
        return "kl_runaway"
    if _end(h, "reward/mean") - _end(h, "acc/sampled") > 0.1:
        return "reward_hacking"
    if _end(h, "len/wrong") > 5:
        return "length_blowup"
    if _end(h, "entropy/mean") < 0.2:
        return "entropy_collapse"
    return "healthy"
