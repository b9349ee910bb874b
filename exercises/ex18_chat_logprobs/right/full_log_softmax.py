"""A correct solution computed another way: the log-softmax of every position first (memory-hungry:
[B, L, V]), then the shift by one and the gather."""
import torch
import torch.nn.functional as F


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    C = completion_mask.shape[1]
    logp_all = F.log_softmax(logits / temperature, dim=-1)            # [B, L, V]
    next_token = logp_all[:, :-1].gather(-1, input_ids[:, 1:, None]).squeeze(-1)   # [B, L - 1]
    return next_token[:, -C:] * completion_mask
