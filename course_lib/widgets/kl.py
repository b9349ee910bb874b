"""Chapter 04's panels: the drift experiment and the adaptive KL controller."""
from __future__ import annotations

from .core import Panel, Slider, panel


def kl_drift_panel() -> Panel:
    """Chapter 04's drift panel: how far the policy's logits are moved from the reference's
    (the seed used 0.3) -> each estimator's bias and spread."""
    from ..plots import kl_drift_view

    return panel(kl_drift_view, drift=Slider(0.3, 0.1, 2.0, 0.1))


def adaptive_kl_panel() -> Panel:
    """Chapter 04's controller panel: the target KL -> beta and KL over training, adaptive vs fixed."""
    from ..plots import adaptive_kl_view

    return panel(adaptive_kl_view, target_kl=Slider(0.1, 0.01, 0.2, 0.01))
