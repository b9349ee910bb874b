"""Known-wrong: the log-sum-exp normaliser computed without a gradient."""
import torch

HINT = ("Your values are right, your gradient is not: part of your computation was cut off from the graph. "
        "A token's log-probability depends on every logit at its position, not only on the chosen token's: "
        "check that each part of it still carries its gradient. Without the others', a step could only raise "
        "the chosen token's logit, never lower the rest.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1] / temperature
    with torch.no_grad():
        lse = torch.logsumexp(scores, dim=-1)
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - lse
    return torch.where(completion_mask, logp, torch.zeros_like(logp))
