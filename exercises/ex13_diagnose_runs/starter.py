"""ex13: diagnose a run from its curves. Fill in the body; run `python judge.py test ex13`."""
from course_lib.toy.diagnosis import Curves

LABELS = ("healthy", "low_temperature", "length_reward", "stale_sampler", "kl_runaway",
          "reward_hacking", "no_signal")


def diagnose(curves: Curves) -> str:
    """One run's monitors (one value per logged step) -> one label of LABELS.

    curves.series(key) -> (steps, values); curves.first(key), curves.last(key),
    curves.mean(key, last_n=...) read one number; curves.keys lists the monitors (chapter 08's
    monitor table, and the reward gap "reward - acc/sampled"). Nothing else: no config, no run name.
    """
    raise NotImplementedError("your code here")
