"""Known-wrong: the shortcut to 1 fires at n - c <= k instead of n - c < k (off by one)."""
import torch

HINT = ("A prompt with exactly k wrong answers gets 1 from you. Check your condition for a sure pass: can a "
        "draw of k still be all wrong there, and in how many ways?")


def pass_at_k(n, c, k):
    out = []
    for ni, ci in zip(n.tolist(), c.tolist()):
        if ni - ci <= k:
            out.append(torch.tensor(1.0, dtype=torch.float64))
            continue
        i = torch.arange(ni - ci + 1, ni + 1, dtype=torch.float64)
        out.append(1.0 - torch.prod(1.0 - k / i))
    return torch.stack(out)
