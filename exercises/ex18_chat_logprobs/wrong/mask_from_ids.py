"""Known-wrong: the mask rebuilt from the ids (ids != pad id), which drops every real EOS."""
import torch

PAD_ID = 2                                        # this tokenizer's pad id (it is also its EOS id)

HINT = ("Your result is 0 on the token that ends each answer with EOS, as if it were padding. Check how your "
        "code decides which positions count, what this tokenizer pads with, and what the task gives you to "
        "tell an answer's tokens from its padding. That EOS is part of the answer: it is how the model learns "
        "to stop.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    L, C = input_ids.shape[1], completion_mask.shape[1]
    scores = logits[:, L - C - 1:L - 1] / temperature
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    mask = input_ids[:, -C:] != PAD_ID
    return torch.where(mask, logp, torch.zeros_like(logp))
