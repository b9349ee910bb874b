"""Chapter 09's panel: each framework's normaliser as the lengths and micro-batches change."""
from __future__ import annotations

from .core import Choice, Panel, Slider, panel


def normaliser_panel() -> Panel:
    """Chapter 09's panel: four responses, the last one's length, Dr. GRPO's L_max and the number of
    micro-batches set by sliders; each framework's per-token and per-response weights."""
    from ..plots import normaliser_view

    def view(long_len, max_len, micro_batches):
        L = max(max_len, long_len)                   # a generation budget covers every response
        return normaliser_view([2, 4, 6, long_len], micro_batches=micro_batches, max_len=L, T=L)

    return panel(view, long_len=Slider(12, 1, 32, 1, integer=True),
                 max_len=Slider(32, 8, 64, 8, integer=True),
                 micro_batches=Choice(2, (1, 2, 4)))
