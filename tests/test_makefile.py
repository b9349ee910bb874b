"""The Makefile's choice of PyTorch build (`make install-plan`, the dry run of what `make` installs) and
its JupyterLab settings, checked with a fake nvidia-smi, a fake local wheel, a fake installed torch and a
local stand-in for PyTorch's CPU index. Nothing is installed and nothing leaves this machine."""
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
                        f"{pip} install --quiet --no-deps --no-build-isolation -e .",
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
