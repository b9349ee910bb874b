"""Input validation and NaN-safe masked reductions.

Everything that takes per-token tensors checks them here, once, and reports bad input
with a ValueError that names the argument, what was expected and what was given.
"""
from __future__ import annotations

import torch
from torch import Tensor

LOG_RATIO_CLAMP = 20.0   # |log r| bound before any exp of a log-ratio, as in verl and OpenRLHF


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return f"a {type(x).__name__}"


def check_tensor(x, name: str, *, ndim: int | None = None, floating: bool = False) -> Tensor:
    """Raise ValueError unless ``x`` is a tensor (of ``ndim`` dims, floating if asked)."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {_describe(x)}")
    if ndim is not None and x.dim() != ndim:
        shape = {1: "[B]", 2: "[B, T]"}.get(ndim, f"{ndim}-d")
        raise ValueError(f"{name} must have shape {shape}, got {_describe(x)}")
    if floating and not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {_describe(x)}")
    return x


def check_mask(mask, like: Tensor, like_name: str = "logp") -> Tensor:
    """Raise ValueError unless ``mask`` is a bool [B, T] tensor with the shape of ``like``."""
    check_tensor(mask, "mask", ndim=2)
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor (True on response tokens), got {_describe(mask)}; "
            "convert a 0/1 tensor with mask.bool()")
    if mask.shape != like.shape:
        raise ValueError(
            f"mask must have the shape of {like_name} {tuple(like.shape)}, got {tuple(mask.shape)}")
    return mask


def check_token_inputs(mask, **tensors: Tensor) -> None:
    """Check that every named tensor is a float [B, T] tensor and that mask matches them."""
    first_name, first = None, None
    for name, x in tensors.items():
        if x is None:
            continue
        check_tensor(x, name, ndim=2, floating=True)
        if first is None:
            first_name, first = name, x
        elif x.shape != first.shape:
            raise ValueError(
                f"{name} must have the shape of {first_name} {tuple(first.shape)}, got {tuple(x.shape)}")
    if first is not None:
        check_mask(mask, first, first_name)


def check_adv(adv, mask: Tensor) -> Tensor:
    """Advantages per sequence [B] or per token [B, T] -> per token [B, T] (padding 0)."""
    check_tensor(adv, "adv", floating=True)
    B, T = mask.shape
    if adv.shape == (B,):
        adv_tok = adv[:, None].expand(B, T)                  # [B, T]
    elif adv.shape == (B, T):
        adv_tok = adv
    else:
        raise ValueError(f"adv must have shape [B]=({B},) or [B, T]=({B}, {T}), got {tuple(adv.shape)}")
    return torch.where(mask, adv_tok, torch.zeros_like(adv_tok))


def check_eps(value, name: str, *, allow_none: bool = False, upper: float | None = None) -> None:
    """Raise ValueError unless ``value`` is a number >= 0 (and < ``upper`` when given)."""
    if value is None and allow_none:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value or value < 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if upper is not None and value >= upper:
        raise ValueError(f"{name} must be < {upper} (a clip range [1-{name}, ...] must stay positive), "
                         f"got {value!r}")


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of x where mask is True. x, mask [B, T] -> scalar, or [B] with dim=-1. Padding may hold NaN."""
    x = torch.where(mask, x, torch.zeros_like(x))
    return x.sum() if dim is None else x.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of x where mask is True; an empty row or batch gives 0 (denominator clamped to 1)."""
    n = mask.sum() if dim is None else mask.sum(dim)
    return masked_sum(x, mask, dim) / n.clamp_min(1)


def zero_padding(x: Tensor, mask: Tensor) -> Tensor:
    """x with padding set to 0, so that exp() or a product never sees a padded NaN or huge value."""
    return torch.where(mask, x, torch.zeros_like(x))
