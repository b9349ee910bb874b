"""Input validation, NaN-safe masked reductions and the clamped log-ratio.

Every argument check of the library lives here, once, and reports bad input with a
ValueError that names the argument, what was expected and what was given. A bool is never
accepted where a number or an int is expected (``True`` is not a group size).
"""
from __future__ import annotations

import torch
from torch import Tensor

LOG_RATIO_CLAMP = 20.0   # |log r| bound before any exp of a log-ratio, as in verl and OpenRLHF


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return f"a {type(x).__name__}"


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def check_number(value, name: str, *, gt=None, ge=None, le=None, allow_none: bool = False) -> None:
    """Raise ValueError unless ``value`` is a real number (not a bool, not NaN) within the bounds.

    gt: value > gt;  ge: value >= ge;  le: value <= le;  allow_none: None passes.
    """
    if value is None and allow_none:
        return
    ok = _is_number(value) and value == value
    if ok and gt is not None:
        ok = value > gt
    if ok and ge is not None:
        ok = value >= ge
    if ok and le is not None:
        ok = value <= le
    if not ok:
        if ge is not None and le is not None:
            bound = f" in [{ge}, {le}]"
        elif gt is not None:
            bound = f" > {gt}"
        elif ge is not None:
            bound = f" >= {ge}"
        else:
            bound = " (not NaN)"
        raise ValueError(f"{name} must be {'None or ' if allow_none else ''}a number{bound}, got {value!r}")


def check_int(value, name: str, *, at_least: int = 1, allow_none: bool = False) -> None:
    """Raise ValueError unless ``value`` is an int (not a bool) >= ``at_least`` (or None if allowed)."""
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < at_least:
        what = "a positive int" if at_least == 1 else f"an int >= {at_least}"
        raise ValueError(f"{name} must be {what}{' or None' if allow_none else ''}, got {value!r}")


def check_choice(value, name: str, choices) -> None:
    """Raise ValueError unless ``value`` is one of ``choices`` (listed in the message as given)."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices!r}, got {value!r}")


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


def check_same_shape(*, ndim: int | None = None, **tensors) -> tuple[str | None, Tensor | None]:
    """Check that every named tensor (None skipped) is floating, ``ndim``-d if given, and of the
    first one's shape. Returns the first name and tensor (None, None when all are None)."""
    first_name, first = None, None
    for name, x in tensors.items():
        if x is None:
            continue
        check_tensor(x, name, ndim=ndim, floating=True)
        if first is None:
            first_name, first = name, x
        elif x.shape != first.shape:
            raise ValueError(
                f"{name} must have the shape of {first_name} {tuple(first.shape)}, got {tuple(x.shape)}")
    return first_name, first


def check_token_inputs(mask, **tensors: Tensor) -> None:
    """Check that every named tensor is a float [B, T] tensor and that mask matches them."""
    first_name, first = check_same_shape(ndim=2, **tensors)
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


def check_seq_adv(adv, mask: Tensor, loss_name: str) -> Tensor:
    """Raise ValueError unless ``adv`` is a tensor of one advantage per sequence [B]."""
    if not (isinstance(adv, Tensor) and adv.shape == mask.shape[:1]):
        raise ValueError(f"adv must have shape [B]=({mask.shape[0]},) for {loss_name} (one advantage per "
                         f"sequence), got {tuple(adv.shape) if isinstance(adv, Tensor) else adv!r}")
    return adv


def check_eps(value, name: str, *, allow_none: bool = False, upper: float | None = None) -> None:
    """Raise ValueError unless ``value`` is a number >= 0 (and < ``upper`` when given)."""
    if value is None and allow_none:
        return
    check_number(value, name, ge=0)
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


def clamped_log_ratio(logp_num: Tensor, logp_den: Tensor, mask: Tensor | None = None, *,
                      per_sequence: bool = False) -> Tensor:
    """log(p_num / p_den) [B, T], 0 on padding (when a mask is given), clamped to +-20.

    The clamp (verl, OpenRLHF) keeps exp() finite: e^20 ~ 4.9e8. per_sequence=True gives every
    token its row's sum over valid tokens, the log of the product of the token ratios; the clamp
    then applies to that sum, once (a response with log rho = 25 gets rho = e^20, one with -25
    gets e^-20, whatever its tokens are).
    """
    log_r = logp_num - logp_den if mask is None else zero_padding(logp_num - logp_den, mask)
    if per_sequence:
        log_r = log_r.sum(dim=-1, keepdim=True).expand_as(log_r)                  # [B, T]
    return log_r.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
