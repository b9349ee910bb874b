"""The exercise READMEs for a terminal: LaTeX formulas turned into readable plain text.

``python judge.py start`` prints the task in a terminal, where ``$\\frac{1}{G-1}\\sum_j ...$`` is
noise. This keeps the Markdown as it is and rewrites what sits between ``$`` / ``$$`` with Unicode
symbols, a/b fractions and C(n, k) binomials; the README itself keeps the typeset formulas. Anything
not recognised loses its backslash and braces rather than staying as LaTeX; ``strict=True`` raises
instead, which the tests use on every README and hint so that no formula a reader sees is garbled.

(pylatexenc 2.10's ``LatexNodes2Text`` was tried: it drops ``\\binom`` and the grouping of sub- and
superscripts, printing ``∑_j=1^G`` and ``1/G-1``, so the few rules below stay.)
"""
from __future__ import annotations

import re

SYMBOLS = {
    "varepsilon": "ε", "epsilon": "ε", "pi": "π", "rho": "ρ", "tau": "τ", "beta": "β",
    "gamma": "γ", "lambda": "λ", "delta": "δ", "sigma": "σ", "theta": "θ", "mu": "μ", "ell": "ℓ",
    "alpha": "α", "sum": "Σ", "prod": "Π", "partial": "∂", "cdot": "·", "times": "×",
    "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠", "approx": "≈",
    "infty": "∞", "to": "→", "leftarrow": "←", "rightarrow": "→", "in": "∈", "dots": "…",
    "ldots": "…", "cdots": "…", "lvert": "|", "rvert": "|", "mid": "|", "log": "log",
    "exp": "exp", "min": "min", "max": "max", "qquad": "    ", "quad": "  ",
}
DROP = ("displaystyle", "left", "right", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr",
        "big", "Big", "bigg", "Bigg")
ACCENTS = {"bar": "\u0304", "hat": "\u0302", "tilde": "\u0303"}
TEXT_LIKE = ("text", "mathrm", "texttt", "operatorname", "mathcal", "mathbb", "mathbf", "mathit")
_GROUP = r"\{([^{}]*)\}"                     # one brace group without nested braces


def _balanced_call(x: str) -> bool:
    """``f(...)`` or ``(...)`` whose outer parentheses enclose everything after the name."""
    m = re.fullmatch(r"[\w\x01\x02\u0300-\u036f]*(\(.*\))", x, flags=re.S)
    if not m:
        return False
    depth = 0
    for k, ch in enumerate(m.group(1)):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and k < len(m.group(1)) - 1:
            return False
    return True


def _paren(x: str) -> str:
    x = x.strip()
    atomic = re.fullmatch(r"[\w.|'\x01\x02\u0300-\u036f]+", x) or _balanced_call(x)
    return x if atomic else f"({x})"


_OPEN, _CLOSE = "\x01", "\x02"          # braces of a kept sub/superscript, restored at the end
_ARG = rf"(?:\s*{_GROUP}|\s*(\w))"       # a brace group or a single character


def _frac(m) -> str:
    a = m.group(1) if m.group(1) is not None else m.group(2)
    b = m.group(3) if m.group(3) is not None else m.group(4)
    return f"{_paren(a)}/{_paren(b)} "


def _binom(m) -> str:
    a = m.group(1) if m.group(1) is not None else m.group(2)
    b = m.group(3) if m.group(3) is not None else m.group(4)
    return f"C({a.strip()}, {b.strip()})"


class UnknownLatex(ValueError):
    """A formula holds a command or a brace group the converter does not know (strict mode)."""


def math_to_text(tex: str, strict: bool = False) -> str:
    s = tex
    s = re.sub(r"\\begin\{cases\}|\\end\{cases\}", "", s)
    s = re.sub(r"\\\\(\[[^\]]*\])?", "; ", s)             # row breaks (cases)
    s = s.replace("&", " if ")
    s = s.replace("\\_", "_").replace("\\{", "{").replace("\\}", "}").replace("\\|", "‖")
    s = re.sub(r"\\lvert\s*", "|", s)
    s = re.sub(r"\s*\\rvert", "|", s)
    s = re.sub(r"\\[,;:! ]", " ", s)
    for cmd in DROP:
        s = re.sub(rf"\\{cmd}(?![a-zA-Z])", "", s)
    for name, sym in SYMBOLS.items():
        s = re.sub(rf"\\{name}(?![a-zA-Z])", lambda m, sym=sym: sym, s)
    for _ in range(8):                                     # innermost groups first
        before = s
        s = re.sub(rf"\\(?:{'|'.join(TEXT_LIKE)}){_GROUP}", r"\1", s)
        s = re.sub(rf"([_^]){_GROUP}", lambda m: m.group(1) + (
            m.group(2) if re.fullmatch(r"\w", m.group(2)) else _OPEN + m.group(2) + _CLOSE), s)
        s = re.sub(rf"\\[dt]?frac{_ARG}{_ARG}", _frac, s)
        s = re.sub(rf"\\[dt]?binom{_ARG}{_ARG}", _binom, s)
        s = re.sub(rf"\\sqrt{_GROUP}", r"sqrt(\1)", s)
        for name, mark in ACCENTS.items():
            s = re.sub(rf"\\{name}\s*{_GROUP}", lambda m, mark=mark: m.group(1) + mark, s)
            s = re.sub(rf"\\{name}\s*(\w)", lambda m, mark=mark: m.group(1) + mark, s)
        if s == before:
            break
    left = re.findall(r"\\[a-zA-Z]+", s) + re.findall(r"(?<![_^])\{[^{}]*\}", s)
    if strict and left:
        raise UnknownLatex(f"not converted in {tex!r}: {', '.join(dict.fromkeys(left))}")
    s = re.sub(r"\\([a-zA-Z]+)", r"\1", s)                # anything else: the bare name
    s = re.sub(r"\{([^{}]*)\}", r"\1", s)                 # leftover grouping braces
    s = s.replace(_OPEN, "{").replace(_CLOSE, "}")
    s = re.sub(r"[ \t]+", " ", s).replace("if otherwise", "otherwise")
    s = re.sub(r" ([,.;)])", r"\1", s)
    return s.strip()


def markdown_to_terminal(md: str, strict: bool = False) -> str:
    """The README with every $...$ and $$...$$ formula in plain text (code blocks untouched).
    With ``strict``, a formula holding LaTeX the converter does not know raises UnknownLatex."""
    out = []
    for k, chunk in enumerate(re.split(r"(```.*?```)", md, flags=re.S)):
        if k % 2:                                          # a fenced code block
            out.append(chunk)
            continue
        chunk = re.sub(r"\$\$(.+?)\$\$",
                       lambda m: "\n    " + math_to_text(m.group(1), strict).replace("\n", "\n    ") + "\n",
                       chunk, flags=re.S)
        chunk = re.sub(r"\$([^$\n]+?)\$", lambda m: math_to_text(m.group(1), strict), chunk)
        out.append(chunk)
    text = "".join(out)
    return re.sub(r"\n{3,}", "\n\n", text)
