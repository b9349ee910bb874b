"""Chapter 03's panel: each response's reward and length -> the four aggregation modes' weights."""
from __future__ import annotations

from .core import Panel, Slider, panel


AGG_PANEL_MAX_LEN = 4096          # Dr. GRPO's constant L_max in the chapter-03 panel (a generation budget)


def aggregation_panel() -> Panel:
    """Chapter 03's panel: each response's reward and length -> per-token and whole-response weights
    of all four aggregation modes (defaults: the seed's group, rewards [1,0,0,1], lengths
    [200,50,2000,400])."""
    from ..plots import aggregation_view

    rewards = (1.0, 0.0, 0.0, 1.0)
    lengths = (200, 50, 2000, 400)
    controls = {}
    for i in range(4):
        controls[f"R{i}"] = Slider(rewards[i], 0.0, 1.0, 0.25)
        controls[f"L{i}"] = Slider(lengths[i], 50, 4000, 50, integer=True)

    def view(**v):
        return aggregation_view([v[f"R{i}"] for i in range(4)], [v[f"L{i}"] for i in range(4)],
                                AGG_PANEL_MAX_LEN)

    return panel(view, columns=[(f"R{i}", f"L{i}") for i in range(4)], **controls)
