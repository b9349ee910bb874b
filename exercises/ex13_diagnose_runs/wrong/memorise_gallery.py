"""Known-wrong: recognises the chapter's runs by their numbers instead of by their symptoms."""
import json
from pathlib import Path

HINT = ("Your rules recognise the chapter's own runs but not other runs with the same failure: a threshold "
        "fitted to the exact numbers of the gallery, or a lookup of its runs. Check each threshold: does it "
        "leave a margin, and is it on the monitor that the failure moves first?")

_FILE = Path(__file__).resolve().parents[3] / "notebooks" / "data" / "toy_gallery.json"
_RUNS = json.loads(_FILE.read_text())["runs"]


def _fingerprint(rewards):
    return tuple(round(v, 3) for v in rewards[1:] if v is not None)


_KNOWN = {_fingerprint(run["columns"]["reward/mean"]): name
          for name, runs in _RUNS.items() for run in runs}


def diagnose(curves):
    name = _KNOWN.get(_fingerprint([None] + curves.series("reward/mean")[1]), "healthy")
    return name if name in ("low_temperature", "length_reward", "stale_sampler", "kl_runaway",
                            "reward_hacking", "no_signal") else "healthy"
