"""The pinned environment: the lock files pin every requirement of requirements.txt at its version, the
CPU lock holds no NVIDIA package, and the venv `make` built holds exactly the lock it installed (the one
named in .venv/.install-plan), package for package and version for version."""
import importlib.metadata as metadata
import re
import sys
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"


def read_lock(path: Path, env: dict | None = None) -> dict[str, Version]:
    """{name: version} of the lock's lines whose marker holds in `env` (default: this interpreter)."""
    pins = {}
    for line in path.read_text().splitlines():
        if not line or line[0] in "# ":
            continue
        spec, _, marker = line.partition(";")
        name, version = spec.split()[0].split("==")          # lock/model.txt's lines carry a --hash
        if marker.strip() and not Marker(marker).evaluate(env):
            continue
        assert canonicalize_name(name) not in pins, f"{path.name}: two pins of {name} hold at once"
        pins[canonicalize_name(name)] = Version(version)
    return pins


def direct_pins() -> dict[str, Version]:
    text = (ROOT / "requirements.txt").read_text()
    return {canonicalize_name(n): Version(v) for n, v in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


MACOS = {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix",
         "platform_machine": "arm64", "python_full_version": "3.11.9", "python_version": "3.11",
         "implementation_name": "cpython", "platform_python_implementation": "CPython"}
LINUX = dict(MACOS, sys_platform="linux", platform_system="Linux", platform_machine="x86_64")


@pytest.mark.parametrize("lock, env", [("cpu", LINUX), ("default", LINUX), ("default", MACOS)],
                         ids=["cpu-linux", "default-linux", "default-macos"])   # the CPU lock is Linux's only
def test_each_lock_pins_every_direct_requirement_at_its_version(lock, env):
    pins = read_lock(ROOT / "lock" / f"{lock}.txt", env)
    for name, version in direct_pins().items():
        want = Version(f"{version}+cpu") if lock == "cpu" and name == "torch" else version
        assert pins.get(name) == want, (f"lock/{lock}.txt pins {name} {pins.get(name)}, requirements.txt "
                                        f"{version}: run `make lock`")


def test_the_cpu_lock_holds_no_nvidia_package_and_macos_gets_none_either():
    assert not [n for n in read_lock(ROOT / "lock/cpu.txt", LINUX) if n.startswith(("nvidia", "triton"))]
    assert not [n for n in read_lock(ROOT / "lock/default.txt", MACOS) if n.startswith(("nvidia", "triton"))]
    assert "appnope" in read_lock(ROOT / "lock/default.txt", MACOS)       # ipykernel's macOS-only need
    linux_gpu = read_lock(ROOT / "lock/default.txt", LINUX)
    assert "nvidia-cudnn-cu13" in linux_gpu and "triton" in linux_gpu


def installed() -> dict[str, Version]:
    return {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions()}


def requirement_closure(names, have: dict) -> set[str]:
    """The installed packages that `names` pull in, following each installed package's requirements."""
    from packaging.requirements import Requirement
    seen, todo = set(), [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen or name not in have:
            continue
        seen.add(name)
        for req in metadata.requires(name) or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(r.name))
    return seen


@pytest.mark.skipif(Path(sys.prefix).resolve() != VENV.resolve(), reason="runs in the course's .venv only")
def test_the_venv_holds_exactly_the_lock_make_installed():
    plan = (VENV / ".install-plan").read_text()
    lock = re.search(r" -r (lock/\S+\.txt)", plan).group(1)
    have = installed()
    have.pop("course-lib")                                   # the course itself, installed editable
    want = read_lock(ROOT / lock)
    wrong = {n: (str(have.get(n)), str(v)) for n, v in want.items() if have.get(n) != v}
    assert not wrong, f"installed vs {lock} (name: (installed, locked)): {wrong}; `make clean && make venv` starts over"
    allowed = set(want) | set(read_lock(ROOT / "lock/model.txt"))   # the model's wheel, installed without deps
    if "playwright" in have:                                 # make playwright
        allowed |= set(read_lock(ROOT / "lock/browser.txt"))
    if "verl" in have:                                       # make peers
        allowed |= requirement_closure(["verl", *direct_peers()], have)
    extra = sorted(f"{n}=={have[n]}" for n in set(have) - allowed)
    assert not extra, f"installed but in no lock: {extra}; `make clean && make venv` starts over"


def direct_peers() -> list[str]:
    text = (ROOT / "tests/peers-requirements.txt").read_text()
    return re.findall(r"^([A-Za-z0-9_.-]+)==", text, re.M)


SHARED_WITH_PEERS = ("torch", "transformers", "accelerate", "tokenizers", "huggingface-hub", "safetensors",
                     "peft")


def test_the_peers_venv_pins_the_courses_versions_of_what_both_trainers_run_on():
    """benchmarks/trl_real.py times TRL's trainer beside the course's in the peers venv; the chapters' runs were
    made in the course's venv: the model stack they share is pinned to the same versions in both."""
    course = read_lock(ROOT / "lock/cpu.txt")
    peers = read_lock(ROOT / "tests/peers-requirements.txt")
    public = lambda v: v and v.public                 # noqa: E731  (2.13.0+cpu is the build of 2.13.0)
    assert {n: (course[n], peers.get(n)) for n in SHARED_WITH_PEERS if public(peers.get(n)) != public(course[n])} == {}
