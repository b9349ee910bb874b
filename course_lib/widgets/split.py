"""Chapter 10's panel: micro-batches, ranks and the spread of lengths -> every strategy's gradient ratio."""
from __future__ import annotations

from .core import Choice, Slider, panel

BATCH = 48          # divisible by every world_size x n_micro the panel offers


def split_panel():
    """A batch of 48 responses split evenly over world_size ranks x n_micro micro-batches; each naive
    strategy's gradient against the full batch, per mode, as |g_split| / |g_full| and the cosine."""
    from ..rl import split as S
    from ..display import table

    def view(world_size, n_micro, spread):
        lengths = S.spread_lengths(BATCH, 100, spread)
        T = int(lengths.max())
        mask = __import__("torch").arange(T)[None] < lengths[:, None]
        rows = S.ratio_rows(mask, S.even_split(BATCH, world_size, n_micro), max_len=4 * 100,
                            modes=["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
        by = {}
        for mode, strategy, norm, cos, _, _ in rows:
            by.setdefault(strategy, []).append(f"{norm:5.2f}x ({cos:.3f})")
        head = (f"{BATCH} responses, lengths {int(lengths.min())}-{T} (mean {lengths.double().mean():.0f}), "
                f"{world_size} rank(s) x {n_micro} micro-batch(es) of {BATCH // (world_size * n_micro)}\n"
                "|g_split| / |g_full| (cosine) per mode\n")
        return head + table([[s, *v] for s, v in by.items()],
                            ["strategy", "token-mean", "seq-mean-token-mean", "Dr. GRPO (L_max 400)"])

    return panel(view, world_size=Choice(2, (1, 2, 4)), n_micro=Choice(2, (1, 2, 3, 4, 6)),
                 spread=Slider(0.6, 0.0, 1.5, 0.1))
