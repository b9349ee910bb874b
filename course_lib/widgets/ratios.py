"""Chapter 05's panels: the gradient coefficient c(r, A) of every loss, and SAPO's gate."""
from __future__ import annotations

from .core import Panel, Slider, panel


def grad_coefficient_panel() -> Panel:
    """Chapter 05's panel: move the clip ranges, the dual-clip cap and SAPO's temperatures and
    watch the per-token gradient coefficient c(r, A) of every loss."""
    from ..plots import grad_coefficient_view

    return panel(grad_coefficient_view,
                 eps_low=Slider(0.2, 0.04, 0.48, 0.04), eps_high=Slider(0.28, 0.04, 0.48, 0.04),
                 dual_clip=Slider(3.0, 1.5, 5.0, 0.5),
                 tau_pos=Slider(1.0, 0.5, 2.0, 0.05), tau_neg=Slider(1.05, 0.5, 2.0, 0.05))


def sapo_gate_panel() -> Panel:
    """Chapter 05's SAPO panel: the two temperatures of the soft gate."""
    from ..plots import sapo_gate_view

    return panel(sapo_gate_view, tau_pos=Slider(1.0, 0.5, 2.0, 0.05),
                 tau_neg=Slider(1.05, 0.5, 2.0, 0.05))
