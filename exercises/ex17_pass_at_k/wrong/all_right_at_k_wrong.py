"""Known-wrong: the shortcut to 1 fires at n - c <= k instead of n - c < k (off by one)."""
import torch

HINT = ("A prompt with exactly k wrong answers (n - c = k) gets 1 from you. A draw of k can still be all "
        "wrong there, in one way out of C(n, k): every draw holds a right answer only when fewer than k "
        "answers are wrong.")


def pass_at_k(n, c, k):
    out = []
    for ni, ci in zip(n.tolist(), c.tolist()):
        if ni - ci <= k:
            out.append(torch.tensor(1.0, dtype=torch.float64))
            continue
        i = torch.arange(ni - ci + 1, ni + 1, dtype=torch.float64)
        out.append(1.0 - torch.prod(1.0 - k / i))
    return torch.stack(out)
