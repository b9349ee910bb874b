"""The trainer hands freed memory back to the system after every step of the real model
(``rl.device.return_freed_memory``)."""
import ctypes
import resource

import pytest
import torch

from course_lib.rl import device as D
from course_lib.rl import make_config
from course_lib.rl import trainer as T
from course_lib.toy.policy import TinyGPT

CPU = torch.device("cpu")


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


@pytest.mark.skipif(D._malloc_trim() is None, reason="the C library has no malloc_trim")
def test_the_gaps_freed_blocks_leave_in_the_heap_go_back_to_the_system():
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = 64 * 1024                           # under glibc's mmap threshold: from the heap
    blocks = [libc.malloc(block) for _ in range(1600)]                  # 100 MB
    for b in blocks:
        ctypes.memset(b, 1, block)              # touched: resident
    pin = libc.malloc(block)                    # a block still in use above them keeps the heap's top
    for b in blocks:
        libc.free(b)
    held = resident_mb()
    assert D.return_freed_memory(CPU)
    returned = held - resident_mb()
    libc.free(pin)
    assert returned > 50, f"only {returned:.0f} MB of 100 MB freed went back to the system"


@pytest.mark.parametrize("asks", [True, False])
def test_the_trainer_returns_freed_memory_after_every_step_of_a_policy_that_asks(monkeypatch, asks):
    """The real model asks (its steps free GBs); the toy does not (its steps would run a third slower)."""
    calls = []
    monkeypatch.setattr(T, "return_freed_memory", lambda dev: calls.append(dev) or True)
    if asks:
        monkeypatch.setattr(TinyGPT, "returns_freed_memory", True, raising=False)
    T.train(make_config("smoke"), progress=False, stop_after=3)
    assert calls == ([CPU] * 3 if asks else [])


def test_on_a_gpu_the_host_heap_is_left_alone():
    assert D.return_freed_memory(torch.device("cuda")) is False
