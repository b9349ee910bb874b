"""ex18: log-probs of a chat batch. Fill in the body; run `python judge.py test ex18`."""
import torch
from torch import Tensor


def completion_logprobs(logits: Tensor, input_ids: Tensor, completion_mask: Tensor, temperature: float) -> Tensor:
    """Per-token log-probs [B, C] of the completion tokens of a chat batch.

    input_ids [B, L]: left-padded prompts (width L - C) followed by completions right-padded to width C;
    logits [B, L, V] float32: the model's outputs on input_ids; completion_mask [B, C] bool: True on each
    completion's tokens, its EOS included; temperature: the sampling temperature (> 0).
    -> the log-probability of each completion token under softmax(logits / temperature), 0 where the
    mask is False.
    """
    raise NotImplementedError("your code here")
