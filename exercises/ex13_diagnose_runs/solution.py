"""ex13 reference: a readable rule set. Each rule reads the monitor that names a cause; the order
matters because one failure drags other monitors along (a hacked reward also lengthens the answers and
carries the policy far from the reference; a stale sampler also raises KL)."""
from course_lib.toy.history import History

LABELS = ("healthy", "entropy_collapse", "length_blowup", "stale_sampler", "kl_runaway",
          "reward_hacking", "no_signal")


def start(h: History, key: str, n: int = 5) -> float:
    """Mean of the first n logged values of a metric."""
    ys = h.series(key)[1][:n]
    return sum(ys) / len(ys) if ys else float("nan")


def end(h: History, key: str, n: int = 10) -> float:
    """Mean of the last n logged values of a metric."""
    return h.mean(key, last_n=n)


def diagnose(history: History) -> str:
    h = history
    # the sampler and the learner disagree: healthy runs show float noise (~1e-6), not a tail
    if max(h.series("mismatch/abs_logratio_p99")[1], default=0.0) > 0.1:
        return "stale_sampler"
    # nothing to learn from, from the first steps on
    if start(h, "groups/zero_signal_frac") > 0.9:
        return "no_signal"
    # the reward is not the exact accuracy: the gap says the reward pays for something else
    gap_start = start(h, "reward/mean") - start(h, "acc/sampled")
    gap_end = end(h, "reward/mean") - end(h, "acc/sampled")
    if gap_end > 0.1 and gap_end > 3 * max(gap_start, 0.02):
        return "reward_hacking"          # the gap opened during the run: the policy found a way in
    if end(h, "len/wrong") > 5 and gap_end > 0.05:
        return "length_blowup"           # wrong answers at the budget, and the reward pays for length
    # far from the reference and the accuracy gone (a low temperature also raises KL, but keeps accuracy)
    if end(h, "kl/ref") > 1.5 and end(h, "acc/sampled") < 0.5 * start(h, "acc/sampled"):
        return "kl_runaway"
    if end(h, "entropy/mean") < 0.2:
        return "entropy_collapse"
    return "healthy"
