"""Chapter 12's figures: a real model's replies coloured token by token, the per-token ratio's spread
under each precision and after one step at each learning rate, and the entropy's share above the forking
threshold against the temperature. Presentation only: every number comes from ``course_lib.lm.tokens``."""
from __future__ import annotations

import html

import matplotlib.pyplot as plt
from matplotlib import colormaps
from matplotlib.colors import Normalize, TwoSlopeNorm, to_hex
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from .common import BLUE, GREEN, GREY, ORANGE, RED, light_grid

# token views: which colour map and range each quantity is drawn with
TOKEN_SCALES = {
    "entropy (nats)": ("Blues", 0.0, 4.0, None),
    "log-prob": ("Greens_r", -8.0, 0.0, None),
    "log ratio new/old": ("RdBu_r", -0.5, 0.5, 0.0),
}


def contrast(rgb_a, rgb_b) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (components in 0..1): 1 (none) to 21 (black on white)."""
    def luminance(rgb):
        lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb[:3]]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((luminance(rgb_a), luminance(rgb_b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_colour(background) -> str:
    """"black" or "white", whichever contrasts more with ``background`` (at least 4.58:1 for any colour)."""
    return "black" if contrast(background, (0, 0, 0)) >= contrast(background, (1, 1, 1)) else "white"


class TokenView:
    """A reply as HTML, one span per token, its background coloured by a value; hovering a token shows
    the value. The text is black or white, whichever contrasts more with its background."""

    def __init__(self, texts: list[str], values: list[float], quantity: str, title: str = ""):
        if quantity not in TOKEN_SCALES:
            raise ValueError(f"quantity={quantity!r}; expected one of {list(TOKEN_SCALES)}")
        if len(texts) != len(values):
            raise ValueError(f"{len(texts)} tokens but {len(values)} values")
        self.texts, self.values, self.quantity, self.title = texts, values, quantity, title

    def _repr_html_(self) -> str:
        cmap_name, lo, hi, centre = TOKEN_SCALES[self.quantity]
        cmap = colormaps[cmap_name]
        norm = TwoSlopeNorm(centre, lo, hi) if centre is not None else Normalize(lo, hi, clip=True)
        spans = []
        for text, v in zip(self.texts, self.values):
            background = cmap(float(norm(min(max(v, lo), hi))))
            shown = html.escape(text).replace("\n", "↵<br>") or "∅"
            spans.append(f'<span title="{v:.3f}" style="background:{to_hex(background)};'
                         f'color:{text_colour(background)};'
                         f'padding:1px 0;border-radius:2px">{shown}</span>')
        legend = (f'<div style="font-size:85%;color:#555">{html.escape(self.quantity)}: colour from {lo:g} '
                  f'to {hi:g} ({cmap_name}); hover a token for its value</div>')
        head = f"<div><b>{html.escape(self.title)}</b></div>" if self.title else ""
        body = ('<div style="font-family:var(--jp-code-font-family,monospace);font-size:90%;line-height:1.9;'
                'white-space:pre-wrap;max-width:100%">' + "".join(spans) + "</div>")
        return f"<div>{head}{body}{legend}</div>"


def ratio_spread_plot(rows: dict[str, dict], title: str, *, log_x: bool = True) -> plt.Figure:
    """Each row's per-token ratio as a band: q01-q99 thin, q05-q95 thick, the median a tick; the
    extremes as dots. ``rows`` maps a label to ``lm.tokens.ratio_table``'s dict."""
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(rows) + 1.2))
    for y, (label, r) in enumerate(rows.items()):
        ax.plot([r["q01"], r["q99"]], [y, y], color=BLUE, lw=2)
        ax.plot([r["q05"], r["q95"]], [y, y], color=BLUE, lw=7, alpha=0.6, solid_capstyle="butt")
        ax.plot([r["q50"]], [y], "|", color="black", ms=14)
        ax.plot([r["min"], r["max"]], [y, y], "o", color=RED, ms=4)
    ax.axvline(1.0, color="black", lw=0.8)
    for x in (0.8, 1.28):
        ax.axvline(x, color=GREY, lw=0.8, ls="--")
    ax.set_yticks(range(len(rows)), list(rows))
    ax.invert_yaxis()
    if log_x:
        ax.set_xscale("log")
        ratio_ticks(ax)
    ax.set_xlabel("per-token ratio (bands: 5-95% thick, 1-99% thin; dots: min and max; dashed: 0.8 and 1.28)")
    ax.set_title(title)
    light_grid(ax, axis="x")
    fig.tight_layout()
    return fig


TICKS_NEAR_1 = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5, 2, 3, 5, 10, 20,
                50, 100)


def ratio_ticks(ax: plt.Axes) -> None:
    """Plain decimal ticks (0.8, 0.9, 1.0, ...) on a log-scaled ratio axis, where matplotlib's own would
    read 8x10^-1, 9x10^-1, 10^0; only the ticks inside the axis's range, and no minor labels."""
    lo, hi = ax.get_xlim()
    ticks = [t for t in TICKS_NEAR_1 if lo <= t <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:.1f}" if 0.1 <= x < 10 else f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


CLIP_SERIES = (("clip_frac_0.2_live", "GRPO, eps 0.2: tokens clipped", BLUE, "o-"),
               ("clip_frac_0.28_live", "Clip-Higher, (0.2, 0.28): tokens clipped", ORANGE, "s--"),
               ("gspo_tok_clip_frac_live", "GSPO, (3e-4, 4e-4): tokens of the replies clipped", GREEN, "^-"))


def clip_by_lr_plot(steps: dict[str, dict], held_back: dict[str, dict] | None = None,
                    seed: str = "0") -> plt.Figure:
    """After one step at each learning rate, what each clip would remove, on one base: the tokens of the
    replies with a nonzero advantage (``lm.tokens.step_report``'s ``*_live`` shares; GSPO clips a whole
    reply, so its share counts the tokens of the replies it clips). Left: the ratios of the tokens the
    step trained on; right (``held_back``), of the held-back half, which the step did not train on."""
    panels = {"on the tokens the step trained on": steps}
    if held_back is not None:
        panels["on the held-back half (stepped on the other)"] = held_back
    fig, axes = plt.subplots(1, len(panels), figsize=(4.3 * len(panels), 3.6), sharey=True, squeeze=False)
    for ax, (title, by_lr) in zip(axes[0], panels.items()):
        lrs = list(by_lr)
        for key, label, colour, style in CLIP_SERIES:
            ax.plot(range(len(lrs)), [100 * by_lr[lr][key] for lr in lrs], style, color=colour, label=label)
        ax.set_xticks(range(len(lrs)), [f"lr {lr}" for lr in lrs])
        first = by_lr[lrs[0]]
        ax.set_title(f"{title}\n(seed {seed}: {first['n_live_tokens']} tokens in {first['n_live_replies']} "
                     f"replies with A != 0)", fontsize=9)
        ax.set_ylim(-3, 103)
        ax.set_yticks(range(0, 101, 20))
        light_grid(ax)
    axes[0][0].set_ylabel("share of those tokens clipped (%)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels), frameon=False)
    fig.suptitle("One AdamW step on the real model: what each clip would remove", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


SEED_MARKERS = ("o", "s", "^", "D", "v", "P")


def entropy_by_temperature_plot(series: dict[str, dict], threshold: float,
                                paper_share: float = 0.2) -> plt.Figure:
    """The share of tokens whose entropy exceeds ``threshold`` against the temperature, beside the share
    reported for larger models. ``series`` maps a label (what was measured, with its n) to
    {seed: {temperature: lm.tokens.entropy_shares entry}}: one colour per series, one marker per seed,
    one legend entry each."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    seeds = sorted({s for by_seed in series.values() for s in by_seed}, key=int)
    handles = []
    for (label, by_seed), colour, style in zip(series.items(), (BLUE, ORANGE, GREEN), ("-", "--", ":")):
        for seed, by_t in by_seed.items():
            ts = sorted(by_t, key=float)
            ax.plot([float(t) for t in ts], [100 * by_t[t]["share_above"] for t in ts], ls=style, color=colour,
                    marker=SEED_MARKERS[seeds.index(seed) % len(SEED_MARKERS)], ms=5, alpha=0.8)
        handles.append(Line2D([], [], color=colour, ls=style, label=label))
    handles += [Line2D([], [], color=GREY, ls="", marker=SEED_MARKERS[i % len(SEED_MARKERS)], label=f"seed {s}")
                for i, s in enumerate(seeds)]
    ax.axhline(100 * paper_share, color=RED, ls="--", lw=1)
    handles.append(Line2D([], [], color=RED, ls="--", lw=1, label="about 20% (arXiv 2506.01939, Qwen models)"))
    ax.set_xlabel("temperature")
    ax.set_ylabel(f"tokens with entropy > {threshold} nats (%)")
    ax.set_ylim(0, 100)
    ax.legend(handles=handles, fontsize=7.5, loc="upper left")
    light_grid(ax)
    fig.tight_layout()
    return fig
