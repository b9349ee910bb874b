"""ex03: loss aggregation. Fill in the body; run `python judge.py test ex03`."""
import torch
from torch import Tensor


def aggregate(loss_tok: Tensor, mask: Tensor, mode: str, max_len: int | None = None) -> Tensor:
    """Reduce a per-token loss to the scalar that is minimised. loss_tok [B, T], mask bool [B, T].

    mode: "token-mean" | "seq-mean-token-mean" | "seq-mean-token-sum" | "seq-mean-token-sum-norm".
    Only valid tokens count (padding may hold NaN); the sequence means run over non-empty rows;
    seq-mean-token-sum-norm divides each row's sum by max_len (T when max_len is None).
    """
    raise NotImplementedError("your code here")
