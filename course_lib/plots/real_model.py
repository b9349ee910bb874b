"""Chapter 12's figures: a real model's replies coloured token by token, the per-token ratio's spread
under each precision and after one step at each learning rate, and the entropy's share above the forking
threshold against the temperature. Presentation only: every number comes from ``course_lib.lm.tokens``."""
from __future__ import annotations

import html

import matplotlib.pyplot as plt
from matplotlib import colormaps
from matplotlib.colors import Normalize, TwoSlopeNorm, to_hex

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
    ax.set_xlabel("per-token ratio (bands: 5-95% thick, 1-99% thin; dots: min and max; dashed: 0.8 and 1.28)")
    ax.set_title(title)
    light_grid(ax, axis="x")
    fig.tight_layout()
    return fig


def clip_by_lr_plot(steps: dict[str, dict]) -> plt.Figure:
    """After one step at each learning rate: the share of tokens PPO clips at eps 0.2 and at (0.2, 0.28),
    and GSPO's share of whole responses clipped at (3e-4, 4e-4)."""
    lrs = list(steps)
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    x = range(len(lrs))
    for key, label, colour in (("clip_frac_0.2", "tokens clipped, eps 0.2 (GRPO)", BLUE),
                               ("clip_frac_0.28", "tokens clipped, eps (0.2, 0.28) (Clip-Higher)", ORANGE),
                               ("gspo_seq_clip_frac", "responses clipped, GSPO (3e-4, 4e-4)", GREEN)):
        ax.plot(x, [100 * steps[lr][key] for lr in lrs], "o-", color=colour, label=label)
    ax.set_xticks(list(x), [f"lr {lr}" for lr in lrs])
    ax.set_ylabel("share clipped (%)")
    ax.set_ylim(-3, 145)                     # room above 100% for the legend, so no marker is cut or hidden
    ax.set_yticks(range(0, 101, 20))
    ax.set_title("One AdamW step on the real model: what the clip would remove")
    ax.legend(fontsize=8, loc="upper left")
    light_grid(ax)
    fig.tight_layout()
    return fig


def entropy_by_temperature_plot(shares: dict, threshold: float, paper_share: float = 0.2) -> plt.Figure:
    """The share of tokens whose entropy exceeds ``threshold`` at each temperature (one line per
    seed), beside the share reported for larger models."""
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    for seed, by_t in shares.items():
        ts = sorted(by_t, key=float)
        ax.plot([float(t) for t in ts], [100 * by_t[t]["share_above"] for t in ts], "o-", color=BLUE,
                alpha=0.7, label=f"seed {seed}")
    ax.axhline(100 * paper_share, color=RED, ls="--", lw=1, label="about 20% (arXiv 2506.01939, Qwen models)")
    ax.set_xlabel("temperature")
    ax.set_ylabel(f"tokens with entropy > {threshold} nats (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    light_grid(ax)
    fig.tight_layout()
    return fig
