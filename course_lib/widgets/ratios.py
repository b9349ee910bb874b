"""Chapter 05's panels: the gradient coefficient c(r, A) of every loss, and SAPO's gate."""
from __future__ import annotations

from .core import Panel, Slider, panel


def grad_coefficient_panel() -> Panel:
    """Chapter 05's panel: move the clip ranges, the dual-clip cap and SAPO's temperatures and
    watch the per-token gradient coefficient c(r, A) of every loss. The controls in columns (the clip
    range, SAPO's temperatures, the dual clip: one row of them, or two with the file browser open), then
    the table and a short figure with its legend beside the axes: the whole panel fits a 1366 x 768
    screen in JupyterLab.

    The ranges reach every case the chapter names: eps_low 0.2 / 0.28 / 0.5 / 0.9 (section 6's floor),
    eps_high 0.2 / 0.28 and 4 (CISPO with TRL's absolute cap 5), dual clip 1.5 and 3, tau_pos 8.8."""
    from ..plots import grad_coefficient_view

    return panel(grad_coefficient_view, columns=[("eps_low", "eps_high"), ("tau_pos", "tau_neg")],
                 eps_low=Slider(0.2, 0.02, 0.98, 0.02), eps_high=Slider(0.28, 0.04, 4.0, 0.04),
                 **_sapo_sliders(), dual_clip=Slider(3.0, 1.5, 5.0, 0.5))


def sapo_gate_panel() -> Panel:
    """Chapter 05's SAPO panel: the two temperatures of the soft gate."""
    from ..plots import sapo_gate_view

    return panel(sapo_gate_view, **_sapo_sliders())


def _sapo_sliders() -> dict:
    """SAPO's temperatures, up to 10: tau_pos = 8.8 puts the A > 0 gate's half point near a 0.2 clip's stop."""
    return dict(tau_pos=Slider(1.0, 0.5, 10.0, 0.05), tau_neg=Slider(1.05, 0.5, 10.0, 0.05))
