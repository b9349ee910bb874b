"""The token ids every toy task shares, and which response positions are valid.

Digits 0-9 are 0-9, then '+', '=', EOS and PAD (padding after EOS, never sampled inside a response's
mask). The addition task (``task``) and the long-answer task (``scratchpad``) both build on these, and
a task's own symbols take the ids after PAD. Nothing in the toy is below this module.
"""
from __future__ import annotations

from torch import Tensor

PLUS, EQUALS, EOS, PAD = 10, 11, 12, 13


def response_mask(responses: Tensor) -> Tensor:
    """Valid response positions [B, T] (bool): every token up to and including the first EOS.

    A response without EOS is valid over its whole length (it was cut off by the budget).
    """
    is_eos = responses == EOS
    before_eos = (is_eos.cumsum(dim=1) - is_eos.long()) == 0          # no EOS strictly before t
    return before_eos & (responses != PAD)
