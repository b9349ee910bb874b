"""Known-wrong: each completion token scored by the logits at its own position (no shift by one)."""
import torch

HINT = ("Each completion token is scored by the logits at its own position. A causal model's logits at a "
        "position are its prediction of the *next* token, made from everything up to that position: the token "
        "in column L - C + t was drawn from the logits of the column before it, and the first completion "
        "token from the prompt's last position.")


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    C = completion_mask.shape[1]
    scores = logits[:, -C:] / temperature
    logp = scores.gather(-1, input_ids[:, -C:, None]).squeeze(-1) - torch.logsumexp(scores, dim=-1)
    return torch.where(completion_mask, logp, torch.zeros_like(logp))
