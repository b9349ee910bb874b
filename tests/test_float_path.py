"""Where a stored float32 run replays digit for digit: only on a CPU whose identity (vendor, family, model,
stepping and the instruction-set flags kernels are chosen by) is the one recorded in the file. A model name is
not an identity: two cloud CPUs that both call themselves "Intel(R) Xeon(R) Processor" chose different MKL and
oneDNN kernels, and the replays of files made on one failed on the other.

The expected identities below are read from the /proc/cpuinfo texts by hand, not by the parser under test.
"""
from __future__ import annotations

import copy
import platform
import sys
from pathlib import Path

import pytest
import torch

from course_lib.lm import runs
from course_lib.rl import history
from course_lib.rl.history import _cpuinfo_identity, cpu_identity, environment, replays_here

# two 2-core cloud machines with the same generic model name (abridged: the fields the parser reads, and a few
# flags of the kinds it must keep or drop)
XEON_A = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Processor
stepping\t: 8
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c hypervisor avx2 smep avx512f avx512bw \
avx512_vnni amx_bf16 amx_tile amx_int8 constant_tsc

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
flags\t\t: fpu sse
"""
XEON_B = XEON_A.replace("model\t\t: 143", "model\t\t: 167").replace("stepping\t: 8", "stepping\t: 1") \
               .replace("amx_int8 ", "amx_int8 avx512_fp16 ")
GRAVITON = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop \
asimddp sve asimdfhm i8mm bf16 svebf16
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
CPU revision\t: 1
"""


def test_two_cpus_with_one_model_name_have_two_identities():
    a, b = _cpuinfo_identity(XEON_A), _cpuinfo_identity(XEON_B)
    assert a == {"vendor": "GenuineIntel", "family": "6", "model": "143", "stepping": "8",
                 "flags": ["amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_vnni", "avx512bw",
                           "avx512f", "f16c", "fma", "sse", "sse2", "sse4_1", "sse4_2", "ssse3"]}
    assert b["model"] == "167" and b["stepping"] == "1" and set(b["flags"]) - set(a["flags"]) == {"avx512_fp16"}
    assert _cpuinfo_identity(GRAVITON) == {
        "vendor": "0x41", "family": "8", "model": "0xd40", "stepping": "1",
        "flags": ["asimd", "asimddp", "asimdfhm", "asimdhp", "asimdrdm", "bf16", "fphp", "i8mm", "sve", "svebf16"]}


def test_a_cpuinfo_without_flags_or_its_family_gives_no_identity():
    assert _cpuinfo_identity(XEON_A.split("flags")[0]) is None
    assert _cpuinfo_identity(XEON_A.replace("cpu family\t: 6\n", "", 1)) is None
    assert _cpuinfo_identity("") is None


def _flags_from_proc_cpuinfo() -> tuple[dict, set[str]]:
    """The first processor's fields and its whole flags line, read with a plain loop."""
    fields = {}
    for line in Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields, set((fields.get("flags") or fields.get("Features") or "").split())


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists() and sys.platform != "darwin",
                    reason="the CPU's identity is read from /proc/cpuinfo (Linux) or sysctl (macOS)")
def test_this_machines_identity_is_read_and_agrees_with_its_kernels():
    ident = cpu_identity()
    assert ident is not None and all(ident[k] for k in ("vendor", "family", "model", "stepping")), ident
    flags = set(ident["flags"])
    assert flags and flags == set(sorted(flags)), ident
    if Path("/proc/cpuinfo").exists():
        fields, every_flag = _flags_from_proc_cpuinfo()
        assert flags <= every_flag and ident["vendor"] in (fields.get("vendor_id"), fields.get("CPU implementer"))
        kept = {f for f in every_flag if f.startswith(("avx512", "amx", "avx_vnni", "fma", "avx2"))}
        assert kept <= flags, f"dispatch flags left out: {sorted(kept - flags)}"
    # PyTorch's own reading of the same CPU: the kernels it chose need the flags the identity lists
    needs = {"AVX512": "avx512f", "AVX2": "avx2"}.get(torch.backends.cpu.get_cpu_capability())
    if needs and platform.machine() in ("x86_64", "AMD64"):
        assert needs in flags, f"PyTorch runs {torch.backends.cpu.get_cpu_capability()} kernels: {sorted(flags)}"
    assert environment()["cpu_id"] == ident


@pytest.fixture
def here():
    """This machine's environment, with its CPU's identity (what a file made here records)."""
    ident = cpu_identity()
    if not ident:
        pytest.skip("this machine's CPU identity cannot be read: nothing replays here")
    return {**environment(), "cpu_id": ident}


@pytest.mark.parametrize("field", ["flag", "vendor", "family", "model", "stepping"])
def test_an_environment_that_differs_in_one_field_of_the_cpu_does_not_replay(here, field):
    there = copy.deepcopy(here)
    if field == "flag":
        there["cpu_id"]["flags"] = sorted(set(there["cpu_id"]["flags"]) ^ {"amx_fp16"})
    else:
        there["cpu_id"][field] += "0"
    assert there["cpu"] == here["cpu"] and there["cpu_capability"] == here["cpu_capability"]
    assert replays_here(here) and not replays_here(there)


def test_a_file_without_the_cpus_identity_replays_nowhere(here):
    assert not replays_here({k: v for k, v in here.items() if k != "cpu_id"})
    assert not replays_here({**here, "cpu_id": None})


def test_a_machine_that_cannot_read_its_cpus_identity_replays_nothing(here, monkeypatch):
    monkeypatch.setattr(history, "cpu_identity", lambda: None)
    assert not replays_here(environment()) and not replays_here(here)


def test_a_real_model_run_takes_this_float_path_only_with_the_same_cpu_identity(monkeypatch):
    record = {**runs.float_path(), "threads": 2, "date": "2026-12-06 00:00 UTC"}
    if not record["cpu_id"]:
        pytest.skip("this machine's CPU identity cannot be read")
    assert runs.same_float_path(record)
    assert not runs.same_float_path({k: v for k, v in record.items() if k != "cpu_id"})
    other = copy.deepcopy(record)
    other["cpu_id"]["flags"] = other["cpu_id"]["flags"][1:]
    assert other["cpu"] == record["cpu"] and not runs.same_float_path(other)
    assert not runs.same_float_path({**record, "float_path_variables": {"MKL_CBWR": "COMPATIBLE"}})
    monkeypatch.setattr(history, "cpu_identity", lambda: None)
    assert not runs.same_float_path({**record, "cpu_id": None})
