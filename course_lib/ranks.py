"""Run one function on R processes of one gloo process group (CPU), and collect what each returned.

``run_ranks`` starts R processes, joins a gloo process group in each, runs one function on every rank
and returns what each rank returned; processes are killed and the group destroyed whatever happens
(an exception in a rank, a timeout). NCCL on GPUs is the same code with another backend name.
Processes come from a fork server that has imported torch and what DDP imports on first use
(torch._dynamo, some 800 modules, seconds per process): it pays that once per Python session, and
each later start of R ranks takes a fraction of a second. The server ends with this process.

Below everything that runs on ranks: ``rl.trainer.train_distributed`` and ``rl.distributed`` (chapter 10)
call it; it imports nothing of the course but ``masking``.
"""
from __future__ import annotations

import datetime
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from .masking import check_int

# what the fork server imports once: torch's distributed stack and the modules whose functions the
# ranks run (a target must be importable by name in the rank)
PRELOAD = ["torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo", "course_lib.rl.distributed"]


def _entry(rank: int, target: Callable, world_size: int, payload: Any, tmp: str, timeout_s: float) -> None:
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=timeout_s))
    try:
        result = target(rank, world_size, payload)
        torch.save(result, Path(tmp) / f"rank{rank}.pt.part")
        os.replace(Path(tmp) / f"rank{rank}.pt.part", Path(tmp) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_ranks(target: Callable, world_size: int, payload: Any = None, *, timeout_s: float = 120.0) -> list:
    """Run target(rank, world_size, payload) in world_size processes of one gloo group.

    Returns the ranks' results in rank order. A rank's exception is raised here (as torch's
    ProcessRaisedException); past timeout_s a TimeoutError. Every process is gone on return.
    target must be importable (a module-level function) and its result picklable by torch.save.
    """
    import multiprocessing.forkserver
    import torch.multiprocessing as mp
    check_int(world_size, "world_size")
    multiprocessing.forkserver.set_forkserver_preload(PRELOAD)     # read when the server starts
    tmp = tempfile.mkdtemp(prefix="course-ranks-")
    ctx = None
    try:
        ctx = mp.start_processes(_entry, args=(target, world_size, payload, tmp, timeout_s),
                                 nprocs=world_size, join=False, start_method="forkserver")
        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{world_size} ranks did not finish within {timeout_s:g} s")
        return [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(world_size)]
    finally:
        if ctx is not None:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                p.join(10)
        shutil.rmtree(tmp, ignore_errors=True)
