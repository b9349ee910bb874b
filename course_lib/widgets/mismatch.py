"""Chapter 06's panel: the cap C and the batch size -> exact bias and noise of TIS and MIS."""
from __future__ import annotations

from .core import Choice, Panel, Slider, panel


def cap_panel() -> Panel:
    """Chapter 06's panel: move the cap C and the batch size; see the exact bias and noise of TIS
    and MIS on the source chapter's mismatched sampler, against the whole trade-off curve."""
    import functools

    from ..plots import cap_tradeoff_plot
    from ..sim import mismatch

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
