"""Hints for mistakes any exercise can make, when no known-wrong variant of the exercise explains the result:
a flipped sign, a constant factor, NaN from the padding or from a division by an empty count.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .cases import Case


NICE = {-1.0: "-1", 2.0: "2", 0.5: "1/2", 4.0: "4", 0.25: "1/4", -2.0: "-2", -0.5: "-1/2"}


def generic_hint(got, want, fn_name: str) -> str | None:
    """Shape-preserving mistakes any exercise can make: flipped sign, a constant factor."""
    if not (isinstance(got, Tensor) and isinstance(want, Tensor) and got.shape == want.shape
            and got.is_floating_point()):
        return None
    g, w = got.double().reshape(-1), want.double().reshape(-1)
    nz = w.abs() > 1e-6
    if not nz.any() or not bool(torch.isfinite(g).all()):
        return None
    if not bool(torch.allclose(g[~nz], torch.zeros_like(g[~nz]), atol=1e-6)):
        return None
    k = g[nz] / w[nz]
    k0 = float(k.mean())
    if float(k.max() - k.min()) > 1e-4 * max(abs(k0), 1e-12) or abs(k0 - 1) < 1e-3:
        return None
    nice = next((v for x, v in NICE.items() if abs(k0 - x) < 1e-4), None)
    if int(nz.sum()) < 2 and nice is None:
        return None
    if nice == "-1":
        msg = "Every value has the expected size but the opposite sign."
        if fn_name.endswith("_loss"):
            msg += (" A *_loss function returns what is minimised, the negative of the"
                    " objective a paper maximises.")
        return msg
    factor = nice if nice is not None else f"{k0:.4g}"
    return (f"Every value is {factor} times the expected one: a constant factor is missing or "
            "extra somewhere (a normaliser, a coefficient, a count).")


NAN_HINT = ("This case puts NaN in padding positions, and it reached your result. Multiplying by the "
            "mask does not remove a NaN (NaN times 0 is NaN), and a NaN that passes through exp or "
            "a division poisons the gradient even where the value is later masked: select the valid "
            "entries (torch.where) before computing with them.")


ZERO_DIV_HINT = ("Your result contains NaN although the inputs hold none: a division by a count that can "
                 "be 0 here (an empty response, or no valid token at all)? Such counts need a floor "
                 "of 1, e.g. .clamp_min(1).")


def _has_nan(x) -> bool:
    if isinstance(x, Tensor):
        return x.is_floating_point() and bool(x.isnan().any())
    if isinstance(x, (tuple, list)):
        return any(_has_nan(v) for v in x)
    return isinstance(x, float) and math.isnan(x)


def _nan_hint(case: Case, got) -> str | None:
    if not _has_nan(got):
        return None
    inputs = list(case.args.values()) + list(case.kwargs.values())
    return NAN_HINT if any(_has_nan(v) for v in inputs) else ZERO_DIV_HINT
