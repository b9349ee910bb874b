"""Show library code and aligned tables inside notebooks (presentation only)."""
from __future__ import annotations

import difflib
import inspect
from typing import Callable, Sequence


def _show(text: str, language: str = "python") -> None:
    try:
        from IPython.display import Code, display
    except ImportError:                                  # plain Python: print it
        print(text)
        return
    display(Code(text, language=language))


def show_source(fn: Callable, start: str | None = None, end: str | None = None) -> None:
    """Display the real source of a library function, so the notebook never retypes it.

    With ``start`` (and optionally ``end``): only the lines from the first one containing
    ``start`` up to, not including, the first later one containing ``end``.
    """
    _show(source_lines(fn, start, end))


def source_lines(fn: Callable, start: str | None = None, end: str | None = None) -> str:
    """The source text ``show_source`` displays (all of it, or the range from ``start`` to ``end``)."""
    lines = inspect.getsource(fn).splitlines()
    if start is None:
        if end is not None:
            raise ValueError("end= needs start=")
        return "\n".join(lines)
    i = next((k for k, line in enumerate(lines) if start in line), None)
    if i is None:
        raise ValueError(f"start={start!r} is on no line of {fn.__qualname__}'s source")
    j = len(lines)
    if end is not None:
        j = next((k for k in range(i + 1, len(lines)) if end in lines[k]), None)
        if j is None:
            raise ValueError(f"end={end!r} is on no line of {fn.__qualname__}'s source after {start!r}")
    return "\n".join(lines[i:j])


# The notebook's code font, size and line spacing: JupyterLab's theme variables (the offline pages carry
# them too), with the light theme's values where neither applies.
CODE_STYLE = ("font-family: var(--jp-code-font-family, menlo, consolas, 'DejaVu Sans Mono', monospace); "
              "font-size: var(--jp-code-font-size, 13px); line-height: var(--jp-code-line-height, 1.3077)")


class Diff:
    """A unified diff that shows itself in the code font, coloured as Pygments' diff lexer colours it
    in Jupyter (additions green, deletions red, hunk headers purple). The colours are written on each
    line (inline styles), so they need no stylesheet: JupyterLab, the offline pages and any other
    viewer show the same. As plain text it is the diff itself."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import DiffLexer
        lines = highlight(self.text, DiffLexer(), HtmlFormatter(noclasses=True, nowrap=True)).rstrip("\n")
        return (f'<pre class="course-diff" style="{CODE_STYLE}; margin: 0; padding: 0; '
                f'background: none; overflow-x: auto">{lines}</pre>')


def diff_text(parent: Callable, child: Callable) -> str:
    """The unified diff from ``parent``'s source to ``child``'s (two lines of context)."""
    a = inspect.getsource(parent).splitlines()
    b = inspect.getsource(child).splitlines()
    return "\n".join(difflib.unified_diff(a, b, parent.__name__, child.__name__, lineterm="", n=2))


def show_diff(parent: Callable, child: Callable) -> None:
    """Display a unified diff between two functions' sources: a variant as a small diff."""
    diff = Diff(diff_text(parent, child))
    try:
        from IPython.display import display
    except ImportError:                                  # plain Python: print it
        print(diff)
        return
    display(diff)


ROUNDING = 1e-12    # below this a float64 result is rounding noise: its digits differ from CPU to CPU


def small(x: float, spec: str = ".1e", below: float = ROUNDING) -> str:
    """``x`` formatted with ``spec``, or "< 1e-12" when |x| is below ``below`` (rounding noise, whose
    digits are not a fact: another CPU prints others). float32 noise needs ``below=1e-6``."""
    return f"< {below:.0e}".replace("e-0", "e-") if abs(x) < below else format(x, spec)


def lr_text(lr: float) -> str:
    """A learning rate as papers and configs write it: lr_text(2e-05) -> "2e-5", lr_text(0.00015) -> "1.5e-4"."""
    mantissa, exponent = f"{lr:.3e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def table(rows: Sequence[Sequence], headers: Sequence[str], formats: Sequence[str] | None = None,
          align: str | None = None) -> str:
    """Format rows as an aligned plain-text table; ``formats`` are format specs per column. A spec
    that starts with "~" (e.g. "~+.2e") prints rounding noise as "< 1e-12" (``small``). ``align``: one
    character per column, "<" left or ">" right (the default for every column: numbers line up)."""
    formats = list(formats) if formats is not None else ["" for _ in headers]
    align = align or ">" * len(headers)
    if len(align) != len(headers) or set(align) - set("<>"):
        raise ValueError(f"align must give '<' or '>' for each of the {len(headers)} columns, got {align!r}")
    cells = [[small(v, f[1:]) if f.startswith("~") else format(v, f) for v, f in zip(row, formats)]
             for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda items: "  ".join(s.ljust(w) if a == "<" else s.rjust(w)   # noqa: E731
                                   for s, w, a in zip(items, widths, align))
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])


def chapter_index(notebooks_dir) -> list[tuple[str, str]]:
    """[(file name, title)] of the chapters present in ``notebooks_dir``, in order; the title is the
    first heading of the notebook's first cell."""
    import json
    from pathlib import Path
    out = []
    for path in sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb")):
        first = json.loads(path.read_text())["cells"][0]
        src = "".join(first["source"]).splitlines()
        heading = next((line.lstrip("# ").strip() for line in src if line.startswith("#")), path.stem)
        out.append((path.name, heading))
    return out


def joined(values: Sequence, spec: str) -> str:
    """Numbers formatted alike and joined by commas: joined([0.25, 0.5], ".0%") -> "25%, 50%"."""
    return ", ".join(format(v, spec) for v in values)


def mean_and_range(values: Sequence, spec: str) -> str:
    """The mean of a few numbers (one per seed) and their range, max - min, alike: "0.412 (0.031)"; a single
    number alone, since one seed has no range."""
    if not values:
        raise ValueError("mean_and_range needs at least one value")
    if len(values) == 1:
        return format(values[0], spec)
    return f"{sum(values) / len(values):{spec}} ({max(values) - min(values):{spec}})"
