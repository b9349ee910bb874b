"""The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on
Code", arXiv 2107.03374): from n samples of which c are correct, the probability that k samples
drawn without replacement contain at least one correct one,

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n-c+1}^{n} (1 - k / i),

the product form avoiding the huge binomials. Averaged over prompts it is the pass@k curve that
compares a policy before and after RL (Yue et al. 2025 read it up to k = 256 and beyond).
"""
from __future__ import annotations

import torch
from torch import Tensor


def pass_at_k(n, c, k: int) -> Tensor:
    """pass@k per prompt, float64, from n samples [P] (or a scalar) with c correct [P]."""
    n = torch.as_tensor(n, dtype=torch.float64)
    c = torch.as_tensor(c, dtype=torch.float64)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    n, c = torch.broadcast_tensors(n, c)
    if (n != n.round()).any() or (c != c.round()).any():
        raise ValueError("n and c must be whole numbers of samples")
    if (c < 0).any() or (c > n).any():
        raise ValueError("c must lie in 0..n (the correct samples among n)")
    if (n < k).any():
        raise ValueError(f"k ({k}) must be <= n, the samples per prompt (smallest n: {int(n.min())})")
    out = torch.empty_like(n)
    for idx in range(n.numel()):             # a product of at most c terms per prompt
        ni, ci = float(n.reshape(-1)[idx]), float(c.reshape(-1)[idx])
        if ni - ci < k:
            out.reshape(-1)[idx] = 1.0       # every k-subset holds a correct sample
        else:
            i = torch.arange(ni - ci + 1, ni + 1, dtype=torch.float64)
            out.reshape(-1)[idx] = 1.0 - torch.prod(1.0 - k / i)
    return out


def pass_at_k_curve(correct_counts, n: int, ks) -> dict[int, float]:
    """{k: mean over prompts of pass@k} for prompts with ``correct_counts`` [P] correct of n samples each."""
    return {int(k): float(pass_at_k(n, correct_counts, int(k)).mean()) for k in ks}
