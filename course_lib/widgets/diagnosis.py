"""Chapter 08's panel: any monitor of any failure against the healthy run."""
from __future__ import annotations

from .core import Choice, Panel, Slider, panel


def gallery_panel(runs: dict) -> Panel:
    """Chapter 08's panel over its stored gallery ``runs`` ({name: [History per seed]}, with the reward
    gap added): pick a failure and a monitor, see it against the healthy run (and the fixes, where the
    chapter shows them) with the failure's onset marked, smoothed over so many logged rows, with the
    step at which each seed leaves the healthy run of the same seed."""
    from ..toy import curves, diagnosis

    failures = [f.label for f in diagnosis.FAILURES]
    monitors = [k for k, _ in diagnosis.MONITORS] + [diagnosis.REWARD_GAP]

    def view(failure, monitor, smooth):
        f = diagnosis.FAILURE[failure]
        sel = {"healthy": runs["healthy"], failure: runs[failure]}
        sel.update({name: runs[name] for name in (f.fixes or {})})
        onset = diagnosis.ONSETS[failure]
        n_common = len(diagnosis.by_step(runs[failure] + runs["healthy"], monitor))
        if n_common < 20:                        # e.g. len/correct when a run gets almost nothing right
            moved = f"is logged at only {n_common} steps in every run: too few to tell when it departs"
        else:
            steps = diagnosis.departures(runs[failure], runs["healthy"], monitor)
            moved = ("leaves the healthy run of its seed at step " +
                     " / ".join("-" if s is None else str(s) for s in steps) + " (seeds "
                     + " / ".join(str(h.config["seed"]) for h in runs[failure]) + "; -: never)")
        end = curves.seed_values(sel, monitor)
        lines = [f"{failure}, from step {onset}: {f.cause}", f"first curve: {f.curve}; fix: {f.knob}",
                 f"{monitor} {moved}, by section 2's rule",
                 "end of run, per seed (mean of the last 20 steps; acc/heldout: the final evaluation):"]
        lines += [f"  {name:<30} {curves.per_seed(v, '.3g')}" for name, v in end.items()]
        fig = curves.plot_runs(sel, [monitor], window=smooth, ncols=1, panel_size=(7.0, 3.2), onset=onset)
        return "\n".join(lines), fig

    return panel(view, failure=Choice(failures[0], failures), monitor=Choice("entropy/mean", monitors),
                 smooth=Slider(3, 1, 15, 1, integer=True))
