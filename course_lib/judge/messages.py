"""Torch-free message helpers shared by the front end and the worker."""
from __future__ import annotations


def syntax_error_message(exc: SyntaxError) -> str:
    """'SyntaxError on line N: <msg>' with the reader's line and a caret under the spot."""
    text = (exc.text or "").rstrip("\n")
    where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
    msg = f"SyntaxError on {where}: {exc.msg}"
    if text.strip():
        indent = len(text) - len(text.lstrip())
        caret = " " * max((exc.offset or 1) - 1 - indent, 0) + "^"
        msg += f"\n    {text.strip()}\n    {caret}"
    return msg
