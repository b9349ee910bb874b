"""Known-wrong: the logits are not divided by the temperature."""
import torch

HINT = ("Right at temperature 1, wrong at any other, and your values stay the same whatever the "
        "temperature: which distribution were these tokens sampled from? Check that the log-probabilities "
        "you return are taken under that one; a ratio against the sampler's log-probs otherwise compares two "
        "different distributions (TRL's GRPO trainer made this mistake until trl#3029).")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1]
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    return torch.where(completion_mask, logp, torch.zeros_like(logp))
