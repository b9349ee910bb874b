"""Known-wrong: never looks at the sampler/learner gap."""
HINT = ("A stale sampler looks like a too-high learning rate on the reward and KL curves. The monitor "
        "that tells them apart is mismatch/abs_logratio_p99: about 1e-6 (float noise) when the "
        "sampler has the learner's weights, far above that when it does not.")


def _start(h, key, n=5):
    ys = h.series(key)[1][:n]
    return sum(ys) / len(ys)


def _end(h, key, n=10):
    return h.mean(key, last_n=n)


def diagnose(history):
    h = history
    if _start(h, "groups/zero_signal_frac") > 0.9:
        return "no_signal"
    gap_start = _start(h, "reward/mean") - _start(h, "acc/sampled")
    gap_end = _end(h, "reward/mean") - _end(h, "acc/sampled")
    if gap_end > 0.1 and gap_end > 3 * max(gap_start, 0.02):
        return "reward_hacking"
    if _end(h, "len/wrong") > 5 and gap_end > 0.05:
        return "length_blowup"
    if _end(h, "kl/ref") > 1.5 and _end(h, "acc/sampled") < 0.5 * _start(h, "acc/sampled"):
        return "kl_runaway"
    if _end(h, "entropy/mean") < 0.2:
        return "entropy_collapse"
    return "healthy"
