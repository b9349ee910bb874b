"""A correct solution computed another way: one token at a time, a whole log-softmax for each."""
import torch


def completion_logprobs(logits, input_ids, completion_mask, temperature):
    B, L = input_ids.shape
    C = completion_mask.shape[1]
    rows = []
    for b in range(B):
        row = []
        for t in range(C):
            if bool(completion_mask[b, t]):
                position = L - C + t                          # the token's column in input_ids
                dist = torch.log_softmax(logits[b, position - 1] / temperature, dim=-1)
                row.append(dist[input_ids[b, position]])
            else:
                row.append(logits.new_zeros(()))
        rows.append(torch.stack(row))
    return torch.stack(rows)
