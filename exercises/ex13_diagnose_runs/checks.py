"""Cases for ex13: the share of runs diagnosed right, on the chapter's gallery and on held-out runs.

``diagnose`` receives a ``diagnosis.Curves`` per run: the monitors' series and nothing else (no config,
no run name). The held-out runs (other seeds, strengths, onsets, healthy variants, and runs where two
things go wrong, labelled by the first) live in the judge's own data folder under opaque names, made by
``benchmarks/toy_results.py --only diagnosis_heldout``; their labels come from
``diagnosis.heldout_labels()``, apart from the series. The feedback names labels and counts, never a
held-out run's numbers.
"""
from pathlib import Path

from course_lib.judge.cases import Case
from course_lib.toy.diagnosis import FAILURE, LABELS, Curves, heldout_labels
from course_lib.rl.history import load_results

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "notebooks" / "data" / "toy_gallery.json"
HELDOUT = ROOT / "course_lib" / "judge" / "data" / "toy_diagnosis_heldout.json"
BAR = 0.8            # share of runs right
SHORT = {"low_temperature": "cold", "length_reward": "length", "stale_sampler": "stale",
         "kl_runaway": "kl", "reward_hacking": "hacking"}     # column heads of the confusion table
LABEL_BAR = 0.5      # and at least this share right within every label


def _gallery():
    _, runs = load_results(GALLERY)
    keep = ["healthy", *FAILURE]                     # fixed runs and the probes are not graded
    return [Curves.of(h) for name in keep for h in runs[name]], [name for name in keep for _ in runs[name]]


def _heldout():
    _, runs = load_results(HELDOUT)
    labels = heldout_labels()
    return ([Curves.of(h) for hs in runs.values() for h in hs],
            [labels[name] for name, hs in runs.items() for _ in hs])


def diagnose_each(fn, runs):
    """The reader's diagnose on a fresh copy of every run's curves (nothing leaks between runs)."""
    return [fn(Curves({k: c.series(k) for k in c.keys})) for c in runs]


def confusion(truth, got) -> str:
    """A table: one row per true label, how many runs were given each label."""
    cols = list(LABELS) + sorted({g for g in got if g not in LABELS}, key=str)
    short = {c: SHORT.get(c, str(c)[:10]) for c in cols}
    width = max(len(t) for t in LABELS) + 2
    lines = ["true \\ given".ljust(width) + " ".join(f"{short[c]:>10}" for c in cols) + "   right"]
    for t in LABELS:
        row = [sum(1 for a, b in zip(truth, got) if a == t and b == c) for c in cols]
        n = sum(row)
        if n:
            lines.append(t.ljust(width) + " ".join(f"{v:>10}" for v in row) + f"   {row[cols.index(t)]}/{n}")
    return "\n".join(lines)


def tally(truth, where: str):
    """What a passing diagnosis scored, in words (the judge prints it under the case)."""
    def summary(got):
        right = sum(a == b for a, b in zip(truth, got))
        return f"{right}/{len(truth)} {where} runs diagnosed right ({right / len(truth):.0%})"
    return summary


def scorer(truth, where: str):
    def score(got):
        if not isinstance(got, list) or len(got) != len(truth):
            return f"expected one label per run ({len(truth)} runs)"
        unknown = sorted({repr(g) for g in got if g not in LABELS})
        right = sum(a == b for a, b in zip(truth, got))
        weak = [t for t in LABELS if t in truth
                and sum(a == b == t for a, b in zip(truth, got)) < LABEL_BAR * truth.count(t)]
        if not unknown and right >= BAR * len(truth) and not weak:
            return None
        msg = [f"{right}/{len(truth)} {where} runs diagnosed right ({right / len(truth):.0%}); "
               f"passing needs {BAR:.0%} overall and half of the runs of every label."]
        if unknown:
            msg.append(f"labels that are not in LABELS: {', '.join(unknown)}")
        if weak:
            msg.append(f"labels right in fewer than half of their runs: {', '.join(weak)}")
        msg.append(confusion(truth, got))
        return "\n".join(msg)
    return score


def cases():
    g_runs, g_truth = _gallery()
    h_runs, h_truth = _heldout()
    return [
        Case(f"fixed: the {len(g_runs)} gallery runs of chapter 08 (healthy and six failures, 3 seeds)",
             "diagnose", {"runs": g_runs}, kind="fixed", sample=True,
             call=diagnose_each, score=scorer(g_truth, "gallery"), summary=tally(g_truth, "gallery")),
        Case(f"held-out: {len(h_runs)} runs you have not seen (other seeds, strengths, onsets; some "
             f"with two failures, labelled by the first)",
             "diagnose", {"runs": h_runs}, kind="random",
             call=diagnose_each, score=scorer(h_truth, "held-out"), summary=tally(h_truth, "held-out")),
    ]
