"""Jupyter's server settings for the course. The Makefile copies this file and course_terminal.bashrc into
the venv (.venv/etc/jupyter/), where `make lab`'s JupyterLab reads them before the reader's own ~/.jupyter
settings, which win wherever both set something."""
import os
import sys
import webbrowser
from pathlib import Path

here = Path(__file__).resolve().parent                       # <venv>/etc/jupyter

# A terminal (File > New > Terminal) runs bash as Jupyter's default would (a login shell when the server
# has no terminal of its own, else one that reads ~/.bashrc), then activates the course's venv last:
# `make lab` puts the venv first on PATH, but a ~/.bashrc or ~/.profile that runs `pyenv init` or
# `conda activate` puts another python back in front. Other shells keep Jupyter's default; the README
# says what to type there.
shell = os.environ.get("SHELL", "")
if Path(shell).name == "bash":
    c.ServerApp.terminado_settings = {"shell_command": [
        "env", f"COURSE_TERMINAL_LOGIN={int(not sys.stdout.isatty())}",
        shell, "--rcfile", str(here / "course_terminal.bashrc"), "-i"]}

# The file browser does not list the exercises' answers: each exercise's solution.py and its right/ and
# wrong/ variants stay where the judge reads them (`python judge.py solution exNN` prints the solution),
# but a reader who opens an exercise's folder for its README does not find them beside it.
c.ContentsManager.hide_globs.extend(["solution.py", "right", "wrong"])

# Kernels get CurveZMQ keys from the server (their kernelspec says they take them), so that what goes
# between the page and a kernel is encrypted, and no kernel warns that it runs over TCP without encryption.
try:
    import zmq
    if zmq.has("curve"):
        c.KernelManager.transport_encryption = "auto"
except ImportError:
    pass

# No browser to open (a server, a container): Jupyter prints the address to open, and nothing else.
try:
    webbrowser.get()
except webbrowser.Error:
    c.ServerApp.open_browser = False
