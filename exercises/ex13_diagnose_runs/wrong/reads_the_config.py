"""Known-wrong: looks for the run's configuration instead of reading its curves."""
HINT = ("diagnose receives the monitors' series only: no config, no run name, nothing that names the knob. "
        "Check what each of your decisions reads: does it come from the curves alone (curves.keys, and "
        "curves.series for each monitor)?")


def diagnose(curves):
    cfg = dict(getattr(curves, "config", None) or {})
    if cfg.get("temperature", 1.0) < 0.6:
        return "low_temperature"
    if cfg.get("mismatch") == "stale":
        return "stale_sampler"
    return "healthy"
