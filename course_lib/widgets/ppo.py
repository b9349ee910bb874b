"""Chapter 01's panels: PPO's clip cases and GAE."""
from __future__ import annotations

from .core import Panel, Slider, Toggle, panel


def clip_panel() -> Panel:
    """Chapter 01's panel: PPO's objective and gradient against r for A = +1 and A = -1."""
    from ..plots import clip_cases_view

    def view(eps_low, eps_high, dual, dual_clip):
        return clip_cases_view(eps_low, eps_high, dual_clip if dual else None)

    return panel(view, eps_low=Slider(0.2, 0.0, 0.48, 0.04), eps_high=Slider(0.2, 0.0, 0.48, 0.04),
                 dual=Toggle(True), dual_clip=Slider(3.0, 2.0, 6.0, 0.5))


def gae_panel() -> Panel:
    """Chapter 01's GAE panel: gamma and lambda on the two-response example, raw and whitened."""
    from ..plots import gae_view

    return panel(gae_view, gamma=Slider(1.0, 0.5, 1.0, 0.05), lam=Slider(0.95, 0.0, 1.0, 0.05))
