"""Chapter 12's panel: pick a reply and a quantity; see the reply coloured token by token."""
from __future__ import annotations

from .core import Choice, Panel, Slider, panel


def token_panel(batch, quantities: dict) -> Panel:
    """``batch``: an ``lm.tokens.ScoredReplies``; ``quantities``: {name in ``plots.real_model.TOKEN_SCALES``:
    [B, T] tensor}. The slider picks the reply, the drop-down the quantity that colours its tokens."""
    from ..plots.real_model import TokenView

    roll = batch.rollout
    B = len(roll.prompts)
    G = batch.questions.group_size

    def view(reply, quantity):
        n = int(roll.lengths[reply])
        values = quantities[quantity][reply, :n].tolist()
        title = (f"reply {reply}: {batch.questions.texts[reply // G]}  reward {batch.rewards[reply]:.0f}, "
                 f"advantage {batch.adv[reply]:+.2f}, {n} tokens"
                 + (" (cut at the budget)" if roll.truncated[reply] else ""))
        return TokenView(batch.texts[reply], values, quantity, title)

    return panel(view, reply=Slider(0, 0, B - 1, 1, integer=True), quantity=Choice(next(iter(quantities)),
                                                                                   list(quantities)))
