"""Comparing what the reader's function returned with the expected result, and saying how they differ.

``compare`` gives None on a match, else one message (shape, dtype class, NaN, the first differing index,
a padding position); any floating dtype is accepted at the case's tolerance, and ``dtype_note`` tells
the reader when theirs differs. ``close`` is the loose equality that recognises a known mistake;
``size_ratio`` measures a wrong result against the expected one for ``judge.py check -v``.
"""
from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor


def _fmt(x) -> str:
    if isinstance(x, Tensor):
        x = x.item()
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, numbers.Real):
        return f"{float(x):.6g}"
    return repr(x)


def _index(flat: int, shape) -> tuple:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    if x is None:
        return "None"
    if isinstance(x, numbers.Real):
        return f"a {type(x).__name__} ({_fmt(x)})"
    return f"a {type(x).__name__}"


def compare(got, want, name: str, atol: float, rtol: float, mask: Tensor | None = None,
            names: tuple[str, ...] = (), what: str = "values") -> str | None:
    """None when got matches want; otherwise a message: what was expected, what came back.

    Any floating dtype is accepted for a floating result: both sides are compared in float64 at the
    case's tolerance, which is set for the inputs' dtype (``dtype_note`` says so to the reader).
    ``what`` names the entries in the message ("values", or "entries" of a gradient)."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return (f"{name}: expected a tuple of {len(want)} tensors, got {_describe(got)}"
                    + (" (did you forget `return`?)" if got is None else ""))
        names = names or tuple(f"{name}[{k}]" for k in range(len(want)))
        parts = [compare(a, b, n, atol, rtol, mask, what=what) for a, b, n in zip(got, want, names)]
        return "\n".join(p for p in parts if p) or None
    if isinstance(want, numbers.Real) and not isinstance(want, Tensor):
        if isinstance(got, Tensor):
            return (f"{name}: expected a Python float, got {_describe(got)}; "
                    "convert with float(...)")
        if not isinstance(got, numbers.Real) or isinstance(got, bool):
            return f"{name}: expected a Python float, got {_describe(got)}"
        got_f = float(got)
        if math.isnan(got_f):
            return f"{name}: got NaN, expected {_fmt(want)}"
        if not math.isclose(got_f, float(want), rel_tol=rtol, abs_tol=atol):
            return (f"{name}: expected {_fmt(want)}, got {_fmt(got_f)} "
                    f"(abs difference {abs(got_f - float(want)):.3g})")
        return None
    # tensors
    if not isinstance(got, Tensor):
        extra = " (did you forget `return`?)" if got is None else ""
        return f"{name}: expected {_describe(want)}, got {_describe(got)}{extra}"
    if got.shape != want.shape:
        return (f"{name}: expected shape {tuple(want.shape)}, got shape {tuple(got.shape)}"
                + (" (a scalar loss has shape ())" if want.dim() == 0 else ""))
    if want.is_floating_point() and not got.is_floating_point():
        return (f"{name}: expected a floating-point tensor ({want.dtype}), got {got.dtype}"
                + (" (integer division or an integer input left unconverted?)"
                   if not got.dtype == torch.bool else ""))
    g = got.detach().to(torch.float64)
    w = want.detach().to(torch.float64)
    where = ""

    def padding_note(idx):
        if mask is not None and tuple(mask.shape) == tuple(g.shape) and not bool(mask[idx]):
            return " (a padding position)"
        return ""

    bad_nan = (g.isnan() & ~w.isnan()) | (g.isinf() & ~w.isinf())
    if bad_nan.any() and g.dim() == 0:
        return f"{name}: got {_fmt(g)}, expected {_fmt(w)}"
    if bad_nan.any():
        idx = _index(int(bad_nan.reshape(-1).nonzero()[0]), g.shape) if g.dim() else ()
        where = f" at index {idx}" if idx else ""
        n = int(bad_nan.sum())
        note = padding_note(idx) if idx else ""
        return (f"{name}: {n} {what[:-1]}(s) are NaN or infinite; first{where}{note}, "
                f"where {_fmt(w[idx] if idx else w)} was expected")
    diff = (g - w).abs()
    bad = diff > atol + rtol * w.abs()
    bad = bad | (g.isnan() != w.isnan())
    if not bad.any():
        return None
    if g.dim() == 0:
        return f"{name}: expected {_fmt(w)}, got {_fmt(g)} (abs difference {float(diff):.3g})"
    idx = _index(int(bad.reshape(-1).nonzero()[0]), g.shape)
    finite = diff[~diff.isnan()]
    max_diff = float(finite.max()) if finite.numel() else float("nan")
    return (f"{name}: {int(bad.sum())} of {g.numel()} {what} differ; first at index {idx}"
            f"{padding_note(idx)}: expected {_fmt(w[idx])}, got {_fmt(g[idx])}; "
            f"max abs difference {max_diff:.3g}")


def _float_tensors(x) -> list[Tensor]:
    if isinstance(x, Tensor):
        return [x] if x.is_floating_point() else []
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _float_tensors(v)]
    return []


def dtype_note(got, want) -> str | None:
    """A note (not a failure) when a floating result's dtype differs from the reference's."""
    for g, w in zip(_float_tensors(got), _float_tensors(want)):
        if g.dtype != w.dtype:
            return (f"your result is {g.dtype} where the reference returns {w.dtype}: any floating "
                    f"dtype is accepted and compared at the tolerance set for the inputs (a trainer "
                    f"usually keeps the inputs' dtype)")
    return None


def close(a, b, atol=1e-5, rtol=1e-4) -> bool:
    """Loose equality used to recognise a known mistake."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(close(x, y, atol, rtol) for x, y in zip(a, b))
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return (a.shape == b.shape
                and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True)))
    if isinstance(a, numbers.Real) and isinstance(b, numbers.Real) and not isinstance(a, Tensor) \
            and not isinstance(b, Tensor):
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol)
    return False


def _flat(x) -> Tensor | None:
    if isinstance(x, (tuple, list)):
        parts = [_flat(v) for v in x]
        return None if any(p is None for p in parts) or not parts else torch.cat(parts)
    if isinstance(x, Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64).reshape(-1)
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return torch.tensor([float(x)], dtype=torch.float64)
    return None


def size_ratio(got, want, signed: bool = False) -> str | None:
    """How the entries that differ compare with the expected ones: 'yours / expected' as a median
    and a range (of |yours| / |expected| unless ``signed``). Used by ``judge.py check -v`` to show
    what a known-wrong variant does, so that its hint can be checked against it."""
    g, w = _flat(got), _flat(want)
    if g is None or w is None or g.shape != w.shape:
        return None
    differ = ((g - w).abs() > 1e-9 + 1e-6 * w.abs()) & (w.abs() > 1e-12) & g.isfinite()
    if not differ.any():
        return None
    r = g[differ] / w[differ]
    r = r if signed else r.abs()
    what = "yours / expected" if signed else "|yours| / |expected|"
    return (f"{what}: median {float(r.median()):.4g}, from {float(r.min()):.4g} to "
            f"{float(r.max()):.4g} over the {int(differ.sum())} entries that differ")
