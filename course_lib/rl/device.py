"""Moving a step's tensors between host and device: pinned copies, syncs for honest timings, one read-back.

On a CPU every function here is (nearly) free; on a GPU each decides where the host waits.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

import torch
from torch import Tensor


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_device(t: Tensor, device: torch.device) -> Tensor:
    """A CPU tensor on ``device``; to a GPU from pinned memory without blocking the host."""
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def stop_check_every(device: torch.device) -> int:
    """How often the sampler asks whether every row has ended: each answer is a host sync on a GPU
    (the queue drains), free on a CPU, where checking every token keeps the fewest decoding steps."""
    return 1 if device.type != "cuda" else 8


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    return getattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim", None)


def return_freed_memory(device: torch.device) -> bool:
    """On a CPU, hand back to the system the pages that freed tensors left in the C allocator's heap (glibc's
    ``malloc_trim(0)``) -> whether any were returned. glibc keeps freed blocks of up to 32 MB for reuse, and
    the gaps between blocks still in use grow from step to step. The trainer calls this after every step of a
    policy whose ``returns_freed_memory`` is true (the real model), so a run's peak memory is its learner step's,
    not that plus the gaps of the steps before; the toy's steps free little, and the pages handed back would
    have to be faulted in again (a third slower). No effect on any number; a no-op on a GPU and where the C
    library has no such call."""
    trim = _malloc_trim() if device.type == "cpu" else None
    return bool(trim and trim(0))


def read_back(metrics: dict) -> dict:
    """A step's metrics with every tensor among them read back to the host in one copy (float64,
    which holds a float32 value exactly: the floats are those float(tensor) gives one by one)."""
    keys = [k for k, v in metrics.items() if isinstance(v, Tensor)]
    if not keys:
        return dict(metrics)
    dev = metrics[keys[0]].device
    values = torch.stack([metrics[k].detach().reshape(()).to(dev, torch.float64) for k in keys]).tolist()
    return {**metrics, **dict(zip(keys, values))}
