"""ex13: diagnose a run from its metric history. Fill in the body; run `python judge.py test ex13`."""
from course_lib.toy.history import History

LABELS = ("healthy", "entropy_collapse", "length_blowup", "stale_sampler", "kl_runaway",
          "reward_hacking", "no_signal")


def diagnose(history: History) -> str:
    """One run's metric history (one row per logged step) -> one label of LABELS.

    history.series(key) -> (steps, values); history.first(key), history.last(key),
    history.mean(key, last_n=...) read one metric. Keys are those of chapter 08's monitor table.
    """
    raise NotImplementedError("your code here")
