"""Known-wrong: the logits are not divided by the temperature."""
import torch

HINT = ("Right at temperature 1, wrong at any other: you score the tokens under the model's plain "
        "softmax, but they were sampled from softmax(logits / T). A ratio against the sampler's log-probs "
        "then compares two different distributions (TRL's GRPO trainer had this omission until trl#3029). "
        "The temperature belongs in the log-probs the loss uses, applied to the logits.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1]
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    return torch.where(completion_mask, logp, torch.zeros_like(logp))
