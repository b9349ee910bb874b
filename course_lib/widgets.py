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

ActiveWhen = Optional[Callable[[dict], bool]]


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

    def active(self) -> dict[str, bool]:
        """Which controls the current values make meaningful (``active_when``; True when unset)."""
        return {name: c.active_when is None or bool(c.active_when(dict(self.values)))
                for name, c in self.controls.items()}

    def widget(self):
        """The ipywidgets view: controls above one HTML area that is replaced whole on each change."""
        import ipywidgets as w

        view = w.HTML()
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
        return w.VBox([w.HBox(list(boxes.values()), layout=w.Layout(flex_flow="row wrap")), view])

    def _ipython_display_(self):
        from IPython.display import display
        try:
            display(self.widget())
        except ImportError:                              # no ipywidgets: show the defaults once
            display(self.update())


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
            parts.append(f'<pre style="margin: 0 0 4px 0">{html.escape(item)}</pre>')
        elif isinstance(item, plt.Figure):
            png = print_figure(item, "png", bbox_inches="tight")   # what the inline backend shows
            plt.close(item)
            width, height = _png_size(png)              # fixed size: no jump while the image decodes
            parts.append(f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}" '
                         f'width="{width}" height="{height}" style="display: block" alt="figure">')
        elif hasattr(item, "_repr_html_"):
            parts.append(item._repr_html_())
        else:
            parts.append(f"<pre>{html.escape(repr(item))}</pre>")
    return "\n".join(parts)


def panel(fn: Callable[..., Any], **controls: Control) -> Panel:
    """Build a slider panel: ``panel(lambda eps: plot(eps), eps=Slider(0.2, 0.0, 0.5))``."""
    if not controls:
        raise ValueError("panel needs at least one control")
    return Panel(fn, **controls)


def group_advantage_panel(max_group: int = 6) -> Panel:
    """Chapter 02's panel: set a group's rewards, see its GRPO, Dr. GRPO and RLOO advantages."""
    from .plots import group_advantage_view

    defaults = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0][:max_group]
    # r_i means something only while i < G: greyed out above G
    rewards = {f"r{i}": Slider(defaults[i], 0.0, 1.0, 0.25, active_when=lambda v, i=i: i < v["G"])
               for i in range(max_group)}

    def view(G, **r):
        return group_advantage_view([r[f"r{i}"] for i in range(G)])

    return panel(view, G=Slider(4, 2, max_group, 1, integer=True), **rewards)


# ---- chapter 01 ----

def clip_panel() -> Panel:
    """Chapter 01's panel: PPO's objective and gradient against r for A = +1 and A = -1."""
    from .plots import clip_cases_view

    def view(eps_low, eps_high, dual, dual_clip):
        return clip_cases_view(eps_low, eps_high, dual_clip if dual else None)

    return panel(view, eps_low=Slider(0.2, 0.0, 0.48, 0.04), eps_high=Slider(0.2, 0.0, 0.48, 0.04),
                 dual=Toggle(True), dual_clip=Slider(3.0, 2.0, 6.0, 0.5))


def gae_panel() -> Panel:
    """Chapter 01's GAE panel: gamma and lambda on the two-response example, raw and whitened."""
    from .plots import gae_view

    return panel(gae_view, gamma=Slider(1.0, 0.5, 1.0, 0.05), lam=Slider(0.95, 0.0, 1.0, 0.05))


# ---- chapter 06 ----
def cap_panel() -> Panel:
    """Chapter 06's panel: move the cap C and the batch size; see the exact bias and noise of TIS
    and MIS on the source chapter's mismatched sampler, against the whole trade-off curve."""
    import functools

    from .plots import cap_tradeoff_plot
    from .sim import mismatch

    bandit = mismatch.seed_bandit()
    caps = [1.0 + 0.25 * i for i in range(77)]                               # 1 .. 20
    # the whole curve depends on the batch size only: computed once per size, not on every move of C
    sweep = functools.lru_cache(maxsize=None)(lambda n: mismatch.cap_sweep(bandit, caps, n))

    def view(C, batch):
        fixed = {k: mismatch.exact_bias_noise(bandit, k, 2.0, batch) for k in ("none", "is")}
        here = {k: mismatch.exact_bias_noise(bandit, k, C, batch) for k in ("tis", "mis")}
        lines = [f"C = {C:.2f}, {batch} samples per batch (exact values, no sampling)"]
        for kind in ("none", "is", "tis", "mis"):
            b, s = {**fixed, **here}[kind]
            lines.append(f"{mismatch.KIND_LABELS[kind]:28s} bias {b:6.1%}   noise {s:6.1%}   "
                         f"sqrt(bias^2 + noise^2) {(b * b + s * s) ** 0.5:6.1%}")
        return "\n".join(lines), cap_tradeoff_plot(caps, sweep(batch), fixed, mark=C)

    return panel(view, C=Slider(2.0, 1.0, 10.0, 0.25), batch=Choice(256, [64, 256, 1024]))


# ---- chapter 05 ----
def grad_coefficient_panel() -> Panel:
    """Chapter 05's panel: move the clip ranges, the dual-clip cap and SAPO's temperatures and
    watch the per-token gradient coefficient c(r, A) of every loss."""
    from .plots import grad_coefficient_view

    return panel(grad_coefficient_view,
                 eps_low=Slider(0.2, 0.04, 0.48, 0.04), eps_high=Slider(0.28, 0.04, 0.48, 0.04),
                 dual_clip=Slider(3.0, 1.5, 5.0, 0.5),
                 tau_pos=Slider(1.0, 0.5, 2.0, 0.05), tau_neg=Slider(1.05, 0.5, 2.0, 0.05))


def sapo_gate_panel() -> Panel:
    """Chapter 05's SAPO panel: the two temperatures of the soft gate."""
    from .plots import sapo_gate_view

    return panel(sapo_gate_view, tau_pos=Slider(1.0, 0.5, 2.0, 0.05),
                 tau_neg=Slider(1.05, 0.5, 2.0, 0.05))


# ---- chapter 03 ----

AGG_PANEL_MAX_LEN = 4096          # Dr. GRPO's constant L_max in the chapter-03 panel (a generation budget)


def aggregation_panel() -> Panel:
    """Chapter 03's panel: each response's reward and length -> per-token and whole-response weights
    of all four aggregation modes (defaults: the seed's group, rewards [1,0,0,1], lengths
    [200,50,2000,400])."""
    from .plots import aggregation_view

    rewards = (1.0, 0.0, 0.0, 1.0)
    lengths = (200, 50, 2000, 400)
    controls = {}
    for i in range(4):
        controls[f"R{i}"] = Slider(rewards[i], 0.0, 1.0, 0.25)
        controls[f"L{i}"] = Slider(lengths[i], 50, 4000, 50, integer=True)

    def view(**v):
        return aggregation_view([v[f"R{i}"] for i in range(4)], [v[f"L{i}"] for i in range(4)],
                                AGG_PANEL_MAX_LEN)

    return panel(view, **controls)


# ---- chapter 04 ----

def kl_drift_panel() -> Panel:
    """Chapter 04's drift panel: how far the policy's logits are moved from the reference's
    (the seed used 0.3) -> each estimator's bias and spread."""
    from .plots import kl_drift_view

    return panel(kl_drift_view, drift=Slider(0.3, 0.1, 2.0, 0.1))


def adaptive_kl_panel() -> Panel:
    """Chapter 04's controller panel: the target KL -> beta and KL over training, adaptive vs fixed."""
    from .plots import adaptive_kl_view

    return panel(adaptive_kl_view, target_kl=Slider(0.1, 0.01, 0.2, 0.01))


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


# ---- chapter 08 ----
def gallery_panel(runs: dict) -> Panel:
    """Chapter 08's panel over its stored gallery ``runs`` ({name: [History per seed]}, with the reward
    gap added): pick a failure and a monitor, see it against the healthy run (and the fix, where the
    chapter shows one), smoothed over so many logged rows, with the step it leaves the healthy band."""
    from .toy import curves, diagnosis

    failures = [f.label for f in diagnosis.FAILURES]
    monitors = [k for k, _ in diagnosis.MONITORS] + [diagnosis.REWARD_GAP]

    def view(failure, monitor, smooth):
        f = diagnosis.FAILURE[failure]
        sel = {"healthy": runs["healthy"], failure: runs[failure]}
        if f.fix is not None:
            sel[f.fix_name] = runs[f.fix_name]
        n_common = len(diagnosis.by_step(runs[failure] + runs["healthy"], monitor))
        if n_common < 20:                        # e.g. len/correct when a run gets almost nothing right
            moved = f"is logged at only {n_common} steps in every run: too few to tell when it departs"
        else:
            step = diagnosis.departure_step(runs[failure], runs["healthy"], monitor)
            moved = (f"leaves the healthy band at step {step}" if step is not None
                     else "stays inside the healthy band for all 150 steps")
        end = curves.seed_values(sel, monitor)
        lines = [f"{failure}: {f.cause}", f"first curve: {f.curve}; fix: {f.knob}",
                 f"{monitor} {moved} (section 2's rule)",
                 "end of run, per seed (mean of the last 20 steps; acc/heldout: the final evaluation):"]
        lines += [f"  {name:<22} {curves.per_seed(v, '.3g')}" for name, v in end.items()]
        fig = curves.plot_runs(sel, [monitor], window=smooth, ncols=1, panel_size=(7.0, 3.2))
        return "\n".join(lines), fig

    return panel(view, failure=Choice(failures[0], failures), monitor=Choice("entropy/mean", monitors),
                 smooth=Slider(3, 1, 15, 1, integer=True))
