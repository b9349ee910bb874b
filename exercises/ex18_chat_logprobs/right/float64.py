"""A correct solution computed another way: in float64, with a Python float temperature, returned in
float64 (the judge accepts any floating dtype and says so in a note)."""
import torch


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    z = logits.double()[:, L - C - 1:-1] / float(temperature)
    lse = torch.logsumexp(z, dim=-1)
    picked = torch.take_along_dim(z, input_ids[:, -C:].unsqueeze(-1), dim=-1).squeeze(-1)
    return (picked - lse).masked_fill(~completion_mask, 0.0)
