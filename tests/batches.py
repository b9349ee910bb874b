"""Random test batches and padding poison, shared by the unit tests (no library code here)."""
from __future__ import annotations

import torch

SEEDS = (0, 1, 2)
DTYPES = (torch.float32, torch.float64)


def tol(dtype) -> dict:
    """Tolerances for comparing a library result in ``dtype`` with a float64 reference."""
    return dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)


def make_mask(gen: torch.Generator, B: int, T: int, holes: bool = False) -> torch.Tensor:
    """Prefix masks with lengths drawn in [1, T], plus row 1 fully masked and row 2 one token long.

    holes=True also masks a few positions inside responses (tool output tokens).
    """
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    lengths[1] = 0
    if B > 2:
        lengths[2] = 1
    mask = torch.arange(T)[None, :] < lengths[:, None]          # [B, T]
    if holes:
        mask &= torch.rand(B, T, generator=gen) > 0.2
    return mask


def make_batch(seed: int, dtype=torch.float64, B: int = 6, T: int = 7, spread: float = 0.3,
               holes: bool = False) -> dict:
    """logp, old_logp, ref_logp, rollout_logp [B, T], adv [B], adv_tok [B, T], is_weight, mask.

    spread is the std of logp - old_logp, so exp(spread) sets how far ratios reach (0.3: most
    ratios in [0.5, 2], both clip sides hit with eps 0.2).
    """
    gen = torch.Generator().manual_seed(seed)
    old_logp = -3 * torch.rand(B, T, generator=gen, dtype=torch.float64)
    logp = old_logp + spread * torch.randn(B, T, generator=gen, dtype=torch.float64)
    ref_logp = old_logp + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    rollout_logp = old_logp + 0.5 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    adv = torch.randn(B, generator=gen, dtype=torch.float64)
    adv_tok = torch.randn(B, T, generator=gen, dtype=torch.float64)
    is_weight = 2 * torch.rand(B, T, generator=gen, dtype=torch.float64)
    mask = make_mask(gen, B, T, holes)
    out = dict(logp=logp, old_logp=old_logp, ref_logp=ref_logp, rollout_logp=rollout_logp,
               adv=adv, adv_tok=adv_tok, is_weight=is_weight)
    out = {k: v.to(dtype) for k, v in out.items()}
    out["mask"] = mask
    return out


def poison(x: torch.Tensor, mask: torch.Tensor, kind: str, seed: int = 123) -> torch.Tensor:
    """x with its padded positions replaced by random values, 1e4, -1e4 or NaN."""
    gen = torch.Generator().manual_seed(seed)
    if kind == "random":
        bad = 50 * torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype)
    elif kind == "huge":
        bad = torch.full_like(x, 1e4)
    elif kind == "-huge":
        bad = torch.full_like(x, -1e4)
    elif kind == "nan":
        bad = torch.full_like(x, float("nan"))
    else:
        raise KeyError(kind)
    return torch.where(mask, x, bad)


POISONS = ("random", "huge", "-huge", "nan")
