"""ex09: TIS and MIS weights. Fill in the bodies; run `python judge.py test ex09`."""
import torch
from torch import Tensor


def tis_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
                level: str = "token") -> Tensor:
    """Truncated IS weight min(rho, cap) [B, T], rho = pi_old / pi_rollout; 0 on padding.

    level="sequence": rho is the product over the response's valid tokens, for all its tokens.
    The weights carry no gradient.
    """
    raise NotImplementedError("your code here")


def mis_weights(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
                level: str = "token") -> Tensor:
    """Masked IS weight rho * 1[rho <= cap] [B, T]; 0 on padding; no gradient.

    Same rho as tis_weights (token or sequence level).
    """
    raise NotImplementedError("your code here")
