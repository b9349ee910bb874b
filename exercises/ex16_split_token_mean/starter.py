"""ex16: token-mean over micro-batches and ranks. Fill in the body; run `python judge.py test ex16`."""
import torch
from torch import Tensor


def micro_batch_loss(loss_tok: Tensor, mask: Tensor, n_tokens: int, world_size: int, n_micro: int) -> Tensor:
    """The loss of one micro-batch (loss_tok, mask [b, T]) on one of world_size ranks, such that the
    gradient summed over each rank's n_micro micro-batches and averaged over the ranks is the whole
    batch's token-mean gradient. n_tokens: the valid tokens of the whole batch. -> scalar tensor.
    """
    raise NotImplementedError("your code here")
