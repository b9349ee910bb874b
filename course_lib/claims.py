"""The claims a chapter pins, one line each: the claim in words and its tolerance.

    claim("k2's mean sits above the exact KL by more than 10 standard errors", bias > 10 * se)
    claim("exact KL(pi || pi_ref)", run.exact, "0.0502")           # exact arithmetic: to the printed digits
    claim("k1's mean", k1_mean, 0.0497, tol=3 * se, tol_text="3 standard errors")   # a Monte-Carlo figure

A claim that holds prints ``✓`` and the claim, never the computed value, so the line reads the same
on every machine where it holds (the value is in the table the cell printed). A claim that fails
says which number moved, to what, and by how much; then:

- under ``make test`` and ``make notebooks`` (``COURSE_CLAIMS=strict``, which ``tests/conftest.py``
  sets too) it raises ``ClaimError`` and the cell fails;
- in a reader's kernel it prints the same line as a warning and the chapter runs on.
"""
from __future__ import annotations

import math
import os
import sys
from numbers import Real

STRICT_VARIABLE = "COURSE_CLAIMS"


class ClaimError(AssertionError):
    """A pinned claim does not hold."""


def strict() -> bool:
    """Whether a failing claim raises (tests) or warns (a reader's kernel)."""
    return os.environ.get(STRICT_VARIABLE, "") == "strict"


def format_like(value: float, expected: str) -> str:
    """``value`` printed the way ``expected`` is: "0.0502", "+0.87", "44%", "+1.08e-03", "12"."""
    sign = "+" if expected.startswith("+") else ""
    body = expected.lstrip("+-")
    kind = "f"
    if body.endswith("%"):
        body, kind = body[:-1], "%"
    elif "e" in body.lower():
        body, kind = body.lower().split("e")[0], "e"
    float(body)                                  # raises on a string that is no number
    decimals = len(body.split(".")[1]) if "." in body else 0
    shown = format(value, f"{sign}.{decimals}{kind}")
    if kind == "e":                              # Python's exponent has at least two digits, like "03"
        mant, exp = shown.split("e")
        want_exp = expected.lower().split("e")[1]
        shown = f"{mant}e{int(exp):+0{len(want_exp)}d}" if want_exp[0] in "+-" else f"{mant}e{int(exp)}"
    if float(shown.rstrip("%")) == 0:            # -0.0000 reads as 0.0000
        shown = shown.replace("-", "+" if sign else "", 1) if shown.startswith("-") else shown
    return shown


def _check_number(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, Real):
        try:                                     # a 0-d tensor or numpy scalar
            x = x.item()
        except AttributeError:
            raise TypeError(f"{name} must be a real number, got {type(x).__name__}") from None
    return float(x)


def claim(text: str, value, expected=None, *, tol: float | None = None, tol_text: str | None = None) -> None:
    """Check one claim and print its line (returns nothing, so a cell's last claim shows no ``Out``).

    ``claim(text, condition)``: a direction or an inequality (a bool).
    ``claim(text, value, "0.0502")``: the value rounds to the string's digits (a number that is the
    same on every CPU: exact arithmetic, or a count); "+0.87", "44%" and "+1.08e-03" are read as
    printed. ``claim(text, values, ["+0.87", "-0.87"])``: each of a sequence (or 1-d tensor) so.
    ``claim(text, value, 0.0497, tol=...)``: |value - expected| <= tol; ``tol_text`` says what the
    tolerance is ("3 standard errors"), else the tolerance is printed.
    """
    if not isinstance(text, str) or not text:
        raise TypeError(f"text must be a non-empty string, got {text!r}")
    if expected is None:
        if tol is not None:
            raise ValueError("tol= needs an expected value: claim(text, value, expected, tol=...)")
        if not isinstance(value, bool) and type(value).__name__ not in ("bool_", "bool"):
            raise TypeError(f"claim({text!r}, condition): condition must be a bool, got "
                            f"{type(value).__name__}; to pin a number give its expected value")
        ok, stated, failed = bool(value), text, f"{text}: does not hold"
    elif isinstance(expected, (str, list, tuple)):
        if tol is not None:
            raise ValueError("give either the printed digits (a string) or a number with tol=, not both")
        if isinstance(expected, str):
            v = _check_number("value", value)
            shown = format_like(v, expected)
            ok = shown == expected
            stated = f"{text} = {expected}"
            failed = (f"{text}: claimed {expected}, computed {shown} "
                      f"(moved by {v - float(expected.rstrip('%')) / (100 if expected.endswith('%') else 1):+.3g})")
        else:
            values = value.tolist() if hasattr(value, "tolist") else list(value)
            if len(values) != len(expected) or not all(isinstance(e, str) for e in expected):
                raise ValueError(f"expected must be {len(values)} strings, one per value, got {expected!r}")
            shown = [format_like(_check_number("value", v), e) for v, e in zip(values, expected)]
            ok = shown == list(expected)
            stated = f"{text} = {', '.join(expected)}"
            moved = [f"{e} -> {s}" for e, s in zip(expected, shown) if e != s]
            failed = f"{text}: claimed {', '.join(expected)}, computed {', '.join(shown)} ({'; '.join(moved)})"
    else:
        v, e = _check_number("value", value), _check_number("expected", expected)
        if tol is None or isinstance(tol, bool) or not (isinstance(tol, Real) and tol >= 0):
            raise ValueError(f"tol must be a number >= 0 when expected is a number, got {tol!r}")
        ok = not math.isnan(v) and abs(v - e) <= tol
        within = tol_text or f"± {tol:.3g}"
        stated = f"{text} = {e:.4g} within {within}"
        failed = (f"{text}: claimed {e:.4g} within {within} (± {tol:.3g}), computed {v:.4g} "
                  f"(moved by {v - e:+.3g})")
    if ok:
        print(f"✓ {stated}")
        return
    line = f"✗ {failed}"
    if strict():
        raise ClaimError(line)
    print(f"{line}\n  (on this machine the claim does not hold as stated; the chapter runs on)", file=sys.stderr)
