"""ex10: GAE. Fill in the body; run `python judge.py test ex10`."""
import torch
from torch import Tensor


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation. rewards, values, mask [B, T] -> (adv, returns) [B, T].

    delta_t = r_t + gamma V_{t+1} - V_t;  A_t = delta_t + gamma lam A_{t+1};  returns = A + V.
    Nothing is bootstrapped past a response's last valid token; masked positions inside a
    response are skipped (V and A carried through); adv and returns are 0 on padding.
    """
    raise NotImplementedError("your code here")
