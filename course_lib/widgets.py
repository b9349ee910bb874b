"""Slider panels that work in JupyterLab and headless (tests, CI, static pages).

A panel is a function of named controls. ``Panel.update(**values)`` calls it without a browser and
returns what it returns, so tests can move every slider; displaying a panel in a notebook shows
ipywidgets controls that re-run the function on every change. Widget code never computes anything:
the function it wraps calls the library.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Slider:
    """A numeric control. ``integer=True`` gives an int slider."""
    default: float
    lo: float
    hi: float
    step: float = 0.01
    integer: bool = False

    def check(self, name: str, value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a number in [{self.lo}, {self.hi}], got {value!r}")
        if not self.lo <= value <= self.hi:
            raise ValueError(f"{name} must lie in [{self.lo}, {self.hi}], got {value!r}")
        if self.integer and value != int(value):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        return int(value) if self.integer else float(value)

    def values(self) -> list[float]:
        """Every position the slider can take (for tests that move it end to end)."""
        n = int(round((self.hi - self.lo) / self.step))
        vals = [self.lo + i * self.step for i in range(n + 1)]
        return [int(round(v)) if self.integer else round(v, 10) for v in vals]

    def widget(self, name: str):
        import ipywidgets as w
        cls = w.IntSlider if self.integer else w.FloatSlider
        return cls(value=self.default, min=self.lo, max=self.hi, step=self.step, description=name,
                   continuous_update=False)


@dataclass(frozen=True)
class Toggle:
    """An on/off control."""
    default: bool

    def check(self, name: str, value) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
        return value

    def values(self) -> list[bool]:
        return [False, True]

    def widget(self, name: str):
        import ipywidgets as w
        return w.Checkbox(value=self.default, description=name)


@dataclass(frozen=True)
class Choice:
    """A drop-down of options."""
    default: Any
    options: Sequence

    def check(self, name: str, value):
        if value not in self.options:
            raise ValueError(f"{name} must be one of {list(self.options)}, got {value!r}")
        return value

    def values(self) -> list:
        return list(self.options)

    def widget(self, name: str):
        import ipywidgets as w
        return w.Dropdown(options=list(self.options), value=self.default, description=name)


Control = Slider | Toggle | Choice


class Panel:
    """fn(**values) behind a set of named controls."""

    def __init__(self, fn: Callable[..., Any], **controls: Control):
        self.fn = fn
        self.controls = controls
        self.values = {name: c.check(name, c.default) for name, c in controls.items()}

    def update(self, **changes) -> Any:
        """Set some controls (validated) and return fn(**all values): the headless path."""
        for name, value in changes.items():
            if name not in self.controls:
                raise ValueError(f"unknown control {name!r}; this panel has {list(self.controls)}")
            self.values[name] = self.controls[name].check(name, value)
        return self.fn(**self.values)

    def widget(self):
        """The ipywidgets view: controls above an output area that re-renders on each change."""
        import ipywidgets as w
        from IPython.display import display
        import matplotlib.pyplot as plt

        out = w.Output()
        boxes = {name: c.widget(name) for name, c in self.controls.items()}

        def render(_change=None):
            with out:
                out.clear_output(wait=True)
                result = self.update(**{n: b.value for n, b in boxes.items()})
                for item in result if isinstance(result, tuple) else (result,):
                    if item is None:
                        continue
                    display(item) if not isinstance(item, str) else print(item)
                    if isinstance(item, plt.Figure):
                        plt.close(item)

        for b in boxes.values():
            b.observe(render, names="value")
        render()
        return w.VBox([w.HBox(list(boxes.values()), layout=w.Layout(flex_flow="row wrap")), out])

    def _ipython_display_(self):
        from IPython.display import display
        try:
            display(self.widget())
        except ImportError:                              # no ipywidgets: show the defaults once
            display(self.update())


def panel(fn: Callable[..., Any], **controls: Control) -> Panel:
    """Build a slider panel: ``panel(lambda eps: plot(eps), eps=Slider(0.2, 0.0, 0.5))``."""
    if not controls:
        raise ValueError("panel needs at least one control")
    return Panel(fn, **controls)


def group_advantage_panel(max_group: int = 6) -> Panel:
    """Chapter 02's panel: set a group's rewards, see its GRPO, Dr. GRPO and RLOO advantages."""
    from .plots import group_advantage_view

    defaults = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0][:max_group]
    rewards = {f"r{i}": Slider(defaults[i], 0.0, 1.0, 0.25) for i in range(max_group)}

    def view(G, **r):
        return group_advantage_view([r[f"r{i}"] for i in range(G)])

    return panel(view, G=Slider(4, 2, max_group, 1, integer=True), **rewards)


# ---- chapter 09 ----
def normaliser_panel() -> Panel:
    """Chapter 09's panel: four responses, the last one's length, Dr. GRPO's L_max and the number of
    micro-batches set by sliders; each framework's per-token and per-response weights."""
    from .plots import normaliser_view

    def view(long_len, max_len, micro_batches):
        L = max(max_len, long_len)                   # a generation budget covers every response
        return normaliser_view([2, 4, 6, long_len], micro_batches=micro_batches, max_len=L, T=L)

    return panel(view, long_len=Slider(12, 1, 32, 1, integer=True),
                 max_len=Slider(32, 8, 64, 8, integer=True),
                 micro_batches=Choice(2, (1, 2, 4)))
