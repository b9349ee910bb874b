"""Known-wrong: the log-sum-exp normaliser computed without a gradient."""
import torch

HINT = ("Your values are right, your gradient is not: the normaliser of the log-softmax (the log-sum-exp "
        "over the vocabulary) was cut off from the graph, by a detach, a no_grad block or a number taken out "
        "with .item(). It depends on every logit: without its gradient a step only raises the chosen token's "
        "logit and never lowers the others'.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1] / temperature
    with torch.no_grad():
        lse = torch.logsumexp(scores, dim=-1)
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - lse
    return torch.where(completion_mask, logp, torch.zeros_like(logp))
