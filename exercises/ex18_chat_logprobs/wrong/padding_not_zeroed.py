"""Known-wrong: the log-probs of the padding after each answer are kept."""
import torch

HINT = ("Your result has values after the end of some answers, on positions that belong to no answer (the "
        "padding after an EOS). Check what the task asks for there: a loss summed over those positions would "
        "train the model on padding.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1] / temperature
    return scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
