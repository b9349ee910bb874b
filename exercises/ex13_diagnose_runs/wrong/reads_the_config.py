"""Known-wrong: looks for the run's configuration instead of reading its curves."""
HINT = ("diagnose receives the monitors' series only: no config, no run name, nothing that names the "
        "knob. Read the curves: curves.series(key) for each monitor in curves.keys.")


def diagnose(curves):
    cfg = dict(getattr(curves, "config", None) or {})
    if cfg.get("temperature", 1.0) < 0.6:
        return "low_temperature"
    if cfg.get("mismatch") == "stale":
        return "stale_sampler"
    return "healthy"
