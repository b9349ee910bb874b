"""The trainer's progress bar: one text line updated in place in a notebook (its final state stays in the
stored output), tqdm's usual bar in a terminal."""
from __future__ import annotations

from tqdm import tqdm          # the text bar: in a notebook it writes to a display line


class _DisplayLine:
    """A file for tqdm that shows its latest line in one notebook output, updated in place.

    The update goes through a display id, so a notebook executed by nbconvert stores the bar's
    final state (not the 0% a widget's text fallback keeps), and no widget is needed to see it.
    """

    def __init__(self):
        self.handle = None

    def write(self, s: str) -> None:
        line = s.replace("\n", "\r").split("\r")
        line = next((x for x in reversed(line) if x.strip()), None)
        if line is None:
            return
        from IPython.display import display
        if self.handle is None:
            self.handle = display({"text/plain": line}, raw=True, display_id=True)
        else:
            self.handle.update({"text/plain": line}, raw=True)

    def flush(self) -> None:
        pass


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A tqdm bar: in a notebook one text line updated in place (its final state stays in the
    stored output), in a terminal tqdm's usual bar on stderr, nothing when not ``enabled``."""
    if not enabled:
        return tqdm(total=total, disable=True)
    if _in_notebook():
        return tqdm(total=total, desc=desc, file=_DisplayLine(), ncols=96, mininterval=1.0)
    return tqdm(total=total, desc=desc, mininterval=1.0)
