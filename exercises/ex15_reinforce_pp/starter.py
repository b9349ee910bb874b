"""ex15: REINFORCE++ advantages. Fill in the body; run `python judge.py test ex15`."""
import torch
from torch import Tensor


def reinforce_pp_advantages(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """Returns-to-go G (skipping masked positions), whitened over the batch's valid tokens.

    rewards [B, T] token rewards; mask bool [B, T] -> adv [B, T]: (G - mean) / sqrt(var + 1e-8) on
    valid tokens (Bessel-corrected var over all valid tokens of the batch), 0 on padding, no gradient.
    """
    raise NotImplementedError("your code here")
