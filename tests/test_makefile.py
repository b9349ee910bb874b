"""The Makefile's choice of PyTorch build (`make install-plan`, the dry run of what `make` installs) and
its JupyterLab settings, checked with a fake nvidia-smi, a fake local wheel, a fake installed torch and a
local stand-in for PyTorch's CPU index; the plan's editable install run for real into a throwaway venv;
`make lab`'s server settings (a terminal's python, the answers the file browser does not list, kernels
over encrypted TCP) checked on a real JupyterLab on the loopback address, under a home whose ~/.bashrc
runs what `pyenv init` does. Nothing leaves this machine."""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = re.search(r"^torch==([0-9.]+)\s*$", (ROOT / "requirements.txt").read_text(), re.M).group(1)

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="the CPU-index choice is Linux-only"),
              pytest.mark.skipif(shutil.which("make") is None, reason="needs make")]


class _Index(http.server.SimpleHTTPRequestHandler):
    hits: list = []

    def do_GET(self):
        type(self).hits.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A stand-in for https://download.pytorch.org/whl/cpu: answers /torch/."""
    root = tmp_path_factory.mktemp("index")
    (root / "torch").mkdir()
    (root / "torch" / "index.html").write_text("<html></html>")
    handler = lambda *a, **k: _Index(*a, directory=str(root), **k)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def closed_url():
    import socket
    with socket.socket() as s:                      # a port nobody listens on: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _venv(path: Path, with_torch: bool) -> Path:
    """A bare venv (no torch) that borrows this venv's pip through a .pth file; fast to make."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    py = path / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    import pip
    borrowed = path / "borrowed"
    borrowed.mkdir()
    (borrowed / "pip").symlink_to(Path(pip.__file__).parent)
    (Path(site) / "borrowed_pip.pth").write_text(str(borrowed) + "\n")
    if with_torch:                                  # what pip sees of an installed torch
        info = Path(site) / f"torch-{PIN}+cpu.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {PIN}+cpu\n")
        (info / "INSTALLER").write_text("pip\n")
        (info / "RECORD").write_text("")
    return path


@pytest.fixture(scope="module")
def venvs(tmp_path_factory):
    root = tmp_path_factory.mktemp("venvs")
    return {"bare": _venv(root / "bare", False), "torch": _venv(root / "torch", True)}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """find-links folders: one with a (fake) local torch wheel of the pinned version, one empty."""
    root = tmp_path_factory.mktemp("wheels")
    (root / "empty").mkdir()
    (root / "local").mkdir()
    name = f"torch-{PIN}+cpu"
    with zipfile.ZipFile(root / "local" / f"{name}-py3-none-any.whl", "w") as z:
        z.writestr(f"{name}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {PIN}+cpu\n")
        z.writestr(f"{name}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{name}.dist-info/RECORD", "")
    return root


@pytest.fixture(scope="module")
def smi(tmp_path_factory):
    """Fake nvidia-smi: one that lists a GPU, one whose driver finds none (exit 9, as the real one)."""
    root = tmp_path_factory.mktemp("smi")
    for name, code in (("gpu", 0), ("nogpu", 9)):
        (root / name).write_text(f"#!/bin/sh\necho 'GPU 0: fake'\nexit {code}\n")
        (root / name).chmod(0o755)
    return {"gpu": str(root / "gpu"), "nogpu": str(root / "nogpu"), "absent": str(root / "absent")}


def _env(find_links: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "MAKE")) and k not in ("MFLAGS", "VIRTUAL_ENV")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS=str(find_links), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _plan(venv: Path, smi_path: str, index_url: str, find_links: Path) -> tuple[list[str], list[str]]:
    """Run `make install-plan`; return (reasons, commands)."""
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "install-plan", f"VENV={venv}",
                          f"NVIDIA_SMI={smi_path}", f"TORCH_CPU_INDEX={index_url}"],
                         env=_env(find_links), check=True, capture_output=True, text=True, timeout=60).stdout
    lines = out.strip().splitlines()
    return [l for l in lines if l.startswith("#")], [l for l in lines if not l.startswith("#")]


def _assert_lock(commands, venv, lock, extra=""):
    pip = f"{venv}/bin/python -m pip"
    assert commands == [f"{pip} install --quiet --no-deps -r lock/{lock}.txt{extra}",
                        f"PYTHONWARNINGS='ignore:Editable installation' {pip} install --quiet --no-deps --no-build-isolation -e .",
                        f"{pip} check"]


def test_gpu_takes_the_default_lock_without_asking_the_index(venvs, wheels, smi, index):
    _Index.hits.clear()
    reasons, commands = _plan(venvs["bare"], smi["gpu"], index, wheels / "local")
    _assert_lock(commands, venvs["bare"], "default")
    assert "NVIDIA GPU found" in reasons[0] and _Index.hits == []


@pytest.mark.parametrize("which", ["absent", "nogpu"])
def test_no_gpu_and_index_reachable_takes_torch_from_the_cpu_index(venvs, wheels, smi, index, which):
    _Index.hits.clear()
    reasons, commands = _plan(venvs["bare"], smi[which], index, wheels / "empty")
    _assert_lock(commands, venvs["bare"], "cpu", f" --extra-index-url {index}")
    assert "CPU build" in reasons[0] and _Index.hits == ["/torch/"]


def test_no_gpu_index_unreachable_and_no_local_wheel_says_it_takes_the_cuda_build(venvs, wheels, smi, closed_url):
    start = time.monotonic()
    reasons, commands = _plan(venvs["bare"], smi["absent"], closed_url, wheels / "empty")
    assert time.monotonic() - start < 30              # refused at once; the probe's own cap is 5 s
    _assert_lock(commands, venvs["bare"], "default")
    assert "unreachable" in reasons[0] and "no local wheel" in reasons[0] and "CUDA build" in reasons[0]


@pytest.mark.parametrize("reach", ["index", "closed_url"])
def test_a_local_wheel_gives_the_cpu_lock_without_asking_the_index(venvs, wheels, smi, request, reach):
    """A local CPU wheel is used whether or not the index answers, and the line says so (the index is
    not asked: the wheel settles it)."""
    _Index.hits.clear()
    reasons, commands = _plan(venvs["bare"], smi["absent"], request.getfixturevalue(reach), wheels / "local")
    _assert_lock(commands, venvs["bare"], "cpu")
    assert "local wheel" in reasons[0] and "unreachable" not in reasons[0] and _Index.hits == []


def test_an_installed_cpu_torch_is_kept_rather_than_fetched_again(venvs, wheels, smi, index):
    _Index.hits.clear()
    reasons, commands = _plan(venvs["torch"], smi["absent"], index, wheels / "empty")
    _assert_lock(commands, venvs["torch"], "cpu")
    assert "installed already" in reasons[0] and _Index.hits == []


def test_macos_takes_the_default_lock(venvs, wheels, smi, index, tmp_path):
    """Any system other than Linux (a fake `uname` says Darwin) gets PyPI's build, never the CPU index."""
    (tmp_path / "uname").write_text("#!/bin/sh\necho Darwin\n")
    (tmp_path / "uname").chmod(0o755)
    _Index.hits.clear()
    env = _env(wheels / "local")
    env["PATH"] = f"{tmp_path}:{env['PATH']}"
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "install-plan", f"VENV={venvs['bare']}",
                          f"NVIDIA_SMI={smi['absent']}", f"TORCH_CPU_INDEX={index}"],
                         env=env, check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
    _assert_lock([l for l in out if not l.startswith("#")], venvs["bare"], "default")
    assert "Darwin" in out[0] and _Index.hits == []


@pytest.mark.parametrize("license_line, noise", [("", None),
                                                   ('license = {text = "MIT"}', "`project.license` as a TOML table")])
def test_the_editable_install_says_nothing_but_other_build_warnings_still_show(wheels, smi, closed_url, tmp_path,
                                                                             license_line, noise):
    """The plan's `-e .` line, run for real on a copy of pyproject.toml: setuptools' framed "Editable
    installation" note is gone; another of its warnings (a deprecated license table, planted) still shows."""
    import sysconfig
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")   # pip and setuptools
    project = tmp_path / "project"
    (project / "course_lib").mkdir(parents=True)
    (project / "course_lib" / "__init__.py").write_text("")
    text = (ROOT / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace("[project]\n", f"[project]\n{license_line}\n"))
    _, commands = _plan(venv, smi["absent"], closed_url, wheels / "local")
    line = next(c for c in commands if c.endswith(" -e ."))
    proc = subprocess.run(["sh", "-c", line], cwd=project, env=_env(Path(os.devnull)), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Editable installation" not in proc.stderr + proc.stdout
    assert (noise in proc.stderr) if noise else proc.stderr == "", proc.stderr
    check = subprocess.run([venv / "bin" / "python", "-c", "import course_lib; print(course_lib.__file__)"],
                           cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    assert check == str(project / "course_lib" / "__init__.py")


@pytest.mark.parametrize("name", ["requirements.txt", "lock/cpu.txt", "lock/default.txt", "lock/browser.txt"])
def test_requirements_pin_torch_exactly_and_name_no_index(name):
    text = (ROOT / name).read_text()
    assert PIN == "2.13.0" and (name == "lock/browser.txt" or re.search(rf"^torch=={PIN}(\+cpu)?\s", text, re.M))
    assert not re.search(r"^\s*(-i|--index-url|--extra-index-url|--find-links)\b", text, re.M)
    assert "download.pytorch.org" not in re.sub(r"#.*", "", text)


def test_make_installs_the_lab_settings_that_turn_off_the_news_popup(venvs):
    venv = venvs["bare"]
    (venv / ".installed-stamp").touch()              # pretend installed: only the settings rule runs
    os.utime(venv / ".installed-stamp", (time.time() + 5, time.time() + 5))
    subprocess.run(["make", "-s", "-C", str(ROOT), f"VENV={venv}",
                    f"{venv}/share/jupyter/lab/settings/overrides.json"],
                   env=_env(Path(os.devnull)), check=True, capture_output=True, timeout=60)
    overrides = json.loads((venv / "share/jupyter/lab/settings/overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


# ------------------------------------------------------------ make lab's Jupyter server settings

BASH = shutil.which("bash")


@pytest.fixture(scope="module")
def lab_server(venvs):
    """The server settings `make lab` installs into a venv: <venv>/etc/jupyter, as the Makefile's rule
    copies them (into the bare test venv, its stamp made newer than the lock files so only that rule runs)."""
    venv = venvs["bare"]
    (venv / ".installed-stamp").touch()
    os.utime(venv / ".installed-stamp", (time.time() + 5, time.time() + 5))
    subprocess.run(["make", "-s", "-C", str(ROOT), f"VENV={venv}", f"{venv}/etc/jupyter/jupyter_server_config.py"],
                   env=_env(Path(os.devnull)), check=True, capture_output=True, timeout=60)
    return venv / "etc" / "jupyter"


def _server_config(etc, monkeypatch, shell=BASH):
    from traitlets.config.loader import PyFileConfigLoader
    monkeypatch.setenv("SHELL", shell)
    return PyFileConfigLoader("jupyter_server_config.py", path=str(etc)).load_config()


@pytest.fixture
def pyenv_home(tmp_path):
    """A home whose ~/.bashrc does what `pyenv init` does, shims first on PATH, and whose ~/.bash_profile
    reads ~/.bashrc (as most do): any `python` the shell finds first is pyenv's shim."""
    home = tmp_path / "home"
    (home / "shims").mkdir(parents=True)
    (home / "shims" / "python").write_text("#!/bin/sh\necho pyenv\n")
    (home / "shims" / "python").chmod(0o755)
    (home / ".bashrc").write_text('export PATH="$HOME/shims:$PATH" FROM_BASHRC=read\n')
    (home / ".bash_profile").write_text('[ -r ~/.bashrc ] && . ~/.bashrc\n')
    return home


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize("login", [1, 0])
def test_a_lab_terminal_finds_the_venvs_python_after_a_bashrc_that_runs_pyenv_init(lab_server, venvs, pyenv_home,
                                                                                 monkeypatch, login):
    """Jupyter's default terminal (`bash -l` when the server has no terminal, else `bash`) under `make lab`'s
    PATH finds pyenv's shim first; the course's terminal command reads the same startup files, then
    activates the venv: its `python` is the venv's, in both modes, and the reader's ~/.bashrc was read."""
    venv = venvs["bare"]
    env = dict(os.environ, HOME=str(pyenv_home), PATH=f"{venv}/bin:{os.environ['PATH']}", VIRTUAL_ENV=str(venv))
    which = ["-c", 'echo "$FROM_BASHRC $(command -v python)"']

    def run(cmd):
        out = subprocess.run(cmd + which, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=60).stdout.strip().splitlines()
        return out[-1] if out else ""

    default = [BASH, "-i"] + (["-l"] if login else [])
    assert run(default) == f"read {pyenv_home}/shims/python"               # the newcomer's terminal
    cmd = _server_config(lab_server, monkeypatch).ServerApp.terminado_settings["shell_command"]
    assert cmd[:2] == ["env", "COURSE_TERMINAL_LOGIN=1"]                  # pytest's stdout is no terminal
    cmd[1] = f"COURSE_TERMINAL_LOGIN={login}"
    assert run(cmd) == f"read {venv}/bin/python"
    # a shell other than bash keeps Jupyter's default (the README says what to type there)
    assert "terminado_settings" not in _server_config(lab_server, monkeypatch, "/bin/zsh").ServerApp


def test_lab_server_settings_hide_the_answers_encrypt_kernels_and_open_no_missing_browser(lab_server, monkeypatch):
    import webbrowser

    import zmq
    from jupyter_client.manager import KernelManager
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

    cfg = _server_config(lab_server, monkeypatch)
    files = AsyncLargeFileManager(config=cfg)
    assert set(AsyncLargeFileManager().hide_globs) < set(files.hide_globs)   # Jupyter's own kept
    assert [files.should_list(n) for n in ("solution.py", "right", "wrong", "README.md", "hints.md", "starter.py")] \
        == [False, False, False, True, True, True]
    assert KernelManager(config=cfg).transport_encryption == ("auto" if zmq.has("curve") else "disabled")

    def no_browser(*args):
        raise webbrowser.Error("could not locate runnable browser")
    monkeypatch.setattr(webbrowser, "get", no_browser)
    assert _server_config(lab_server, monkeypatch).ServerApp.open_browser is False
    monkeypatch.setattr(webbrowser, "get", lambda *args: object())
    assert "open_browser" not in _server_config(lab_server, monkeypatch).ServerApp


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_make_labs_jupyter_lists_no_answers_and_its_terminal_and_kernel_work(lab_server, venvs, pyenv_home, tmp_path):
    """JupyterLab itself with the settings `make lab` installs, on the course folder: an exercise's folder
    lists no solution.py, right/ or wrong/ (solution.py still opens by its path); a terminal's `python` is
    the venv's under a ~/.bashrc that runs pyenv init; a kernel runs code over encrypted TCP, with no
    warning that it is unencrypted."""
    import asyncio
    import urllib.request

    from tornado.websocket import websocket_connect

    venv, port, token = venvs["bare"], _free_port(), "course-lab-test"
    env = dict(os.environ, HOME=str(pyenv_home), SHELL=BASH, JUPYTER_CONFIG_PATH=str(lab_server),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PATH=f"{venv}/bin:{os.environ['PATH']}",
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--notebook-dir={ROOT}"] + (["--allow-root"] if os.geteuid() == 0 else [])
    log = tmp_path / "server.log"
    http, ws = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"

    def api(path, method="GET"):
        req = urllib.request.Request(f"{http}{path}?token={token}", method=method, data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    async def read_until(url, messages, done, timeout=120):
        conn = await websocket_connect(url)
        for m in messages:
            await conn.write_message(json.dumps(m))
        seen = ""
        try:
            while not done(seen):
                msg = await asyncio.wait_for(conn.read_message(), timeout)
                if msg is None:
                    break
                seen += msg
        finally:
            conn.close()
        return seen

    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                api("/api/status")
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                time.sleep(0.25)
        listed = {f["name"] for f in api("/api/contents/exercises/ex18_chat_logprobs")["content"]}
        assert {"README.md", "starter.py", "hints.md", "checks.py"} <= listed, listed
        assert not listed & {"solution.py", "right", "wrong"}, listed
        assert api("/api/contents/exercises/ex18_chat_logprobs/solution.py")["name"] == "solution.py"

        term = api("/api/terminals", "POST")["name"]
        seen = asyncio.run(read_until(f"{ws}/terminals/websocket/{term}?token={token}",
                                      [["stdin", 'echo "@@$(command -v python)@@"\r']],
                                      lambda s: re.search(r"@@(/[^@]*)@@", s)))
        assert re.search(r"@@(/[^@]*)@@", seen).group(1) == f"{venv}/bin/python", seen

        kernel = api("/api/kernels", "POST")["id"]
        request = {"header": {"msg_id": "run-1", "username": "test", "session": "s", "msg_type": "execute_request",
                              "version": "5.3", "date": ""}, "parent_header": {}, "metadata": {}, "channel": "shell",
                   "content": {"code": "print(6 * 7)", "silent": False, "store_history": False,
                               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}, "buffers": []}
        seen = asyncio.run(read_until(f"{ws}/api/kernels/{kernel}/channels?token={token}", [request],
                                      lambda s: '"42\\n"' in s))
        assert '"42\\n"' in seen
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    text = log.read_text()
    assert "without encryption" not in text and "No web browser found" not in text, text
    assert "Traceback" not in text, text


def test_make_lab_installs_the_server_settings_before_it_starts_jupyter(tmp_path):
    venv = tmp_path / "fresh"
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "lab", f"VENV={venv}"], env=_env(Path(os.devnull)),
                         check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
    copy = next(i for i, l in enumerate(out) if l.startswith("cp notebooks/.lab-settings/jupyter_server_config.py "
                                                             "notebooks/.lab-settings/course_terminal.bashrc"))
    assert out[copy].endswith(f"{venv}/etc/jupyter/")
    assert copy < next(i for i, l in enumerate(out) if "jupyter lab" in l)
