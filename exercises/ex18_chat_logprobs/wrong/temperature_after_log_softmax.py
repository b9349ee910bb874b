"""Known-wrong: the log-softmax divided by the temperature, instead of the logits."""
import torch

HINT = ("Right at temperature 1, wrong at any other, although your values do move with the temperature: "
        "are they still the log-probabilities of a distribution, whose exponentials over the whole "
        "vocabulary add up to 1? Check at which step of your computation the temperature acts, and what the "
        "sampler did with it.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1]
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    return torch.where(completion_mask, logp / temperature, torch.zeros_like(logp))
