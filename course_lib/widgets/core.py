"""Slider panels that work in JupyterLab and headless (tests, CI, static pages).

A panel is a function of named controls. ``Panel.update(**values)`` calls it without a browser and
returns what it returns, so tests can move every slider; displaying a panel in a notebook shows
ipywidgets controls that re-run the function on every change. Widget code never computes anything:
the function it wraps calls the library.

The function returns a str, a matplotlib Figure, an object with ``_repr_html_``, or a tuple of these.
The widget shows the whole result as ONE piece of HTML (text and PNG together, see ``to_html``), set in
one update: the text and the figure change at the same moment, and nothing flickers or jumps.

A control may depend on the others: ``active_when=lambda values: ...`` greys it out (disabled, still in
place) while the function ignores it, e.g. the reward sliders beyond the group size G.
"""
from __future__ import annotations

import base64
import html
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ..display import CODE_STYLE

ActiveWhen = Optional[Callable[[dict], bool]]

# Every slider has one width, wide enough that a drag moves by single steps: its track has at least as
# many pixels as the finest slider of the course has steps (SAPO's temperatures, 0.5 to 10 by 0.05: 190).
# ipywidgets 8 gives 176 px of a slider to its label (80) and readout (72 with the margins); at its
# default 300 px the track is 124 px, and a pixel of drag there skips one or two of 190 steps. Measured
# in chromium (tests/test_browser.py checks the track against SLIDER_TRACK_PX).
SLIDER_WIDTH_PX = 380
SLIDER_TRACK_PX = SLIDER_WIDTH_PX - 176


@dataclass(frozen=True)
class Slider:
    """A numeric control. ``integer=True`` gives an int slider."""
    default: float
    lo: float
    hi: float
    step: float = 0.01
    integer: bool = False
    active_when: ActiveWhen = None

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
        vals = [self.lo + i * self.step for i in range(self.steps + 1)]
        return [int(round(v)) if self.integer else round(v, 10) for v in vals]

    @property
    def steps(self) -> int:
        """How many steps the slider has from end to end."""
        return int(round((self.hi - self.lo) / self.step))

    def widget(self, name: str):
        import ipywidgets as w
        cls = w.IntSlider if self.integer else w.FloatSlider
        return cls(value=self.default, min=self.lo, max=self.hi, step=self.step, description=name,
                   continuous_update=False, layout=w.Layout(width=f"{SLIDER_WIDTH_PX}px"))


@dataclass(frozen=True)
class Toggle:
    """An on/off control."""
    default: bool
    active_when: ActiveWhen = None

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
    active_when: ActiveWhen = None

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

    def __init__(self, fn: Callable[..., Any], *, columns: Sequence[Sequence[str]] = (), **controls: Control):
        self.fn = fn
        self.controls = controls
        grouped = [name for group in columns for name in group]
        unknown = sorted(set(grouped) - set(controls))
        if unknown or len(grouped) != len(set(grouped)):
            raise ValueError(f"columns must name each control at most once; unknown or repeated: "
                             f"{unknown or grouped}")
        self.columns = [tuple(group) for group in columns]   # controls shown one above the other
        self.values = {name: c.check(name, c.default) for name, c in controls.items()}

    def update(self, **changes) -> Any:
        """Set some controls (validated) and return fn(**all values): the headless path."""
        for name, value in changes.items():
            if name not in self.controls:
                raise ValueError(f"unknown control {name!r}; this panel has {list(self.controls)}")
            self.values[name] = self.controls[name].check(name, value)
        return self.fn(**self.values)

    def active(self) -> dict[str, bool]:
        """Which controls the current values make meaningful (``active_when``; True when unset)."""
        return {name: c.active_when is None or bool(c.active_when(dict(self.values)))
                for name, c in self.controls.items()}

    def widget(self):
        """The ipywidgets view: controls above one HTML area that is replaced whole on each change."""
        import ipywidgets as w

        view = w.HTML(layout=w.Layout(max_width="100%"))   # never wider than the column
        view.add_class("course-panel-view")               # a stable hook for the browser test
        boxes = {name: c.widget(name) for name, c in self.controls.items()}

        def render(_change=None):
            try:
                result = to_html(self.update(**{n: b.value for n, b in boxes.items()}))
            except Exception as e:                       # shown in place: a callback's traceback is lost
                result = f"<pre>{html.escape(f'{type(e).__name__}: {e}')}</pre>"
            for name, on in self.active().items():
                boxes[name].disabled = not on
            view.value = result                          # one update: text and figure together

        for b in boxes.values():
            b.observe(render, names="value")
        render()
        items = []
        for name in boxes:                   # a column stays whole when the row wraps
            group = next((g for g in self.columns if name in g), None)
            if group is None:
                items.append(boxes[name])
            elif group[0] == name:
                items.append(w.VBox([boxes[n] for n in group]))
        return w.VBox([w.HBox(items, layout=w.Layout(flex_flow="row wrap")), view])

    def _ipython_display_(self):
        from IPython.display import display
        try:
            display(self.widget())
        except ImportError:                              # no ipywidgets: show the defaults once
            display(self.update())


# A panel's view must fit the notebook's column, however narrow (JupyterLab at 1366 px with the file
# browser open leaves about 930 px): a figure shrinks to the column, keeping its aspect ratio (the width
# and height attributes still reserve its space before it decodes); a table too wide scrolls instead of
# being cut; the table's font and line spacing are the code cells', also on the offline pages, where no
# JupyterLab style applies (there a table inherited the widget's 28 px line height: double-spaced).
IMG_STYLE = "display: block; max-width: 100%; height: auto"
PRE_STYLE = f"margin: 0 0 4px 0; overflow-x: auto; max-width: 100%; {CODE_STYLE}"


def _png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])    # the IHDR chunk follows the 8-byte signature
    return width, height


def to_html(result) -> str:
    """A panel function's result as one HTML fragment: str -> <pre>, Figure -> inline PNG (closed
    afterwards), objects with _repr_html_ -> their HTML; tuples in order, None skipped."""
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import print_figure

    parts = []
    for item in result if isinstance(result, tuple) else (result,):
        if item is None:
            continue
        if isinstance(item, str):
            parts.append(f'<pre style="{PRE_STYLE}">{html.escape(item)}</pre>')
        elif isinstance(item, plt.Figure):
            png = print_figure(item, "png", bbox_inches="tight")   # what the inline backend shows
            plt.close(item)
            width, height = _png_size(png)              # fixed size: no jump while the image decodes
            parts.append(f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}" '
                         f'width="{width}" height="{height}" style="{IMG_STYLE}" alt="figure">')
        elif hasattr(item, "_repr_html_"):
            parts.append(item._repr_html_())
        else:
            parts.append(f"<pre>{html.escape(repr(item))}</pre>")
    return "\n".join(parts)


def panel(fn: Callable[..., Any], *, columns: Sequence[Sequence[str]] = (), **controls: Control) -> Panel:
    """Build a slider panel: ``panel(lambda eps: plot(eps), eps=Slider(0.2, 0.0, 0.5))``. ``columns``
    names controls that belong together (``[("R0", "L0"), ...]``): each such group is shown as one
    column, so a wrapping row never splits it."""
    if not controls:
        raise ValueError("panel needs at least one control")
    return Panel(fn, columns=columns, **controls)
