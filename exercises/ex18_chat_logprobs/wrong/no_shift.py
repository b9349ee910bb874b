"""Known-wrong: each completion token scored by the logits at its own position (no shift by one)."""
import torch

HINT = ("Every case is wrong, even a batch of one at temperature 1, so neither the temperature nor the "
        "mask is the cause: check which scores you read each token's log-probability from. For one "
        "completion token, what had the model read when it produced the scores you use, and which token "
        "were they a guess for?")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    C = completion_mask.shape[1]
    scores = logits[:, -C:] / temperature
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    return torch.where(completion_mask, logp, torch.zeros_like(logp))
