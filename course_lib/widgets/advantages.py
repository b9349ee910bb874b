"""Chapter 02's panel: a group's rewards -> its advantages."""
from __future__ import annotations

from .core import Panel, Slider, panel


def group_advantage_panel(max_group: int = 6) -> Panel:
    """Chapter 02's panel: set a group's rewards, see its GRPO, Dr. GRPO and RLOO advantages."""
    from ..plots import group_advantage_view

    defaults = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0][:max_group]
    # r_i means something only while i < G: greyed out above G
    rewards = {f"r{i}": Slider(defaults[i], 0.0, 1.0, 0.25, active_when=lambda v, i=i: i < v["G"])
               for i in range(max_group)}

    def view(G, **r):
        return group_advantage_view([r[f"r{i}"] for i in range(G)])

    return panel(view, G=Slider(4, 2, max_group, 1, integer=True), **rewards)
