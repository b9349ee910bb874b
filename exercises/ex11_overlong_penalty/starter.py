"""ex11: DAPO's overlong penalty. Fill in the body; run `python judge.py test ex11`."""
import torch
from torch import Tensor


def overlong_penalty(lengths: Tensor, max_len: int, cache_len: int) -> Tensor:
    """Soft overlong punishment (DAPO Eq. 13). lengths [B] (int) -> penalty [B] (float32).

    0 up to max_len - cache_len, then linear down to -1 at max_len, and -1 beyond.
    """
    raise NotImplementedError("your code here")
