"""Known-wrong: the log-softmax divided by the temperature, instead of the logits."""
import torch

HINT = ("Right at temperature 1, wrong at any other: you divide the log-probabilities by T after the "
        "log-softmax. That is not the log of a distribution any more (its exponentials no longer add up to "
        "1); the sampler's distribution is softmax(logits / T): the temperature scales the logits, before "
        "they are normalised.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1]
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    return torch.where(completion_mask, logp / temperature, torch.zeros_like(logp))
