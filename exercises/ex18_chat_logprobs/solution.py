"""The logits at position i are the model's prediction of the token at position i + 1, so the C completion
tokens in columns L - C .. L - 1 are scored by the logits of columns L - C - 1 .. L - 2: the first by the
prompt's last position, whatever the row's left padding (every prompt ends in column L - C - 1). The
logits are divided by the temperature before the normalisation, and the normaliser is one logsumexp per
position, so the [B, C, V] log-softmax is never kept (TRL's selective_log_softmax does the same).
completion_mask says which positions count: a mask rebuilt from the ids would lose each EOS, because
this tokenizer pads with its EOS token.
"""
import torch
from torch import Tensor


def completion_logprobs(logits: Tensor, input_ids: Tensor, completion_mask: Tensor, temperature: float) -> Tensor:
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1] / temperature                   # [B, C, V], shifted by one
    tokens = input_ids[:, L - C:]                                       # [B, C]
    chosen = scores.gather(-1, tokens[..., None]).squeeze(-1)           # [B, C]
    logp = chosen - torch.logsumexp(scores, dim=-1)                     # [B, C]
    return torch.where(completion_mask, logp, torch.zeros_like(logp))
