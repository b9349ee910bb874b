"""A data-parallel run's plumbing (``trainer.train_distributed``): this process's rank, the learner
wrapped in DDP, each rank's share of a config, and the step's metrics made the same on every rank.

Every function is the identity, or close to it, in one process (``dp`` None, world size 1).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from .config import ToyConfig
from .rollout import Collected


@dataclass
class DataParallel:
    """This process's place in a data-parallel run (``train_distributed``): rank, world size and the
    learner wrapped in DistributedDataParallel (whose backward averages the ranks' gradients)."""
    rank: int
    world_size: int
    ddp: torch.nn.Module


# monitors reduced over ranks by their maximum; every other one by the mean of the ranks' values
MAX_METRICS = ("ratio/max", "mismatch/abs_logratio_max")


def reduce_over_ranks(metrics: dict, dp: DataParallel | None) -> dict:
    """A step's tensor metrics made the same on every rank: ``MAX_METRICS`` by their maximum, every
    other one by the mean of the ranks' values (a rank's token mean then counts as much as another's,
    whatever their token counts). Identity in one process."""
    if dp is None:
        return metrics
    import torch.distributed as dist
    keys = [k for k, v in metrics.items() if isinstance(v, Tensor)]
    out = dict(metrics)
    for op, group in ((dist.ReduceOp.MAX, [k for k in keys if k in MAX_METRICS]),
                      (dist.ReduceOp.SUM, [k for k in keys if k not in MAX_METRICS])):
        if group:
            t = torch.stack([metrics[k].detach().reshape(()).to(torch.float64) for k in group])
            dist.all_reduce(t, op=op)
            if op == dist.ReduceOp.SUM:
                t = t / dp.world_size
            out.update(zip(group, t))
    return out


def gather_collected(got: Collected, dp: DataParallel | None) -> Collected:
    """One step's sampling on every rank as one Collected (its per-response tensors all-gathered, its
    time and tokens this rank's), so the sampling metrics are the whole batch's. Identity in one process."""
    if dp is None:
        return got
    import torch.distributed as dist

    def cat(t: Tensor) -> Tensor:
        parts = [torch.empty_like(t) for _ in range(dp.world_size)]
        dist.all_gather(parts, t.contiguous())
        return torch.cat(parts)
    return Collected(None, cat(got.rewards), cat(got.correct), cat(got.lengths), cat(got.truncated),
                     got.seconds, got.tokens, got.flops)


def this_rank(cfg: ToyConfig) -> int:
    """This process's rank: 0 in one process; in a run of ``world_size`` > 1, its rank in the process
    group ``train_distributed`` started (an error when this process is not one of its ranks)."""
    R = cfg.world_size
    if R == 1:
        return 0
    import torch.distributed as dist
    if not dist.is_initialized() or dist.get_world_size() != R:
        raise ValueError(f"world_size={R}: run it with train_distributed(cfg), which starts {R} processes "
                         f"of one process group (this process is not one of them)")
    return dist.get_rank()


def wrap(model: torch.nn.Module, rank: int, world_size: int) -> DataParallel | None:
    """The learner in DistributedDataParallel on a rank of a data-parallel run; None in one process."""
    if world_size == 1:
        return None
    from torch.nn.parallel import DistributedDataParallel as DDP
    return DataParallel(rank, world_size, DDP(model))


def rank_share(cfg: ToyConfig, world_size: int) -> ToyConfig:
    """The config one rank runs: prompts_per_step / world_size groups, as one process."""
    if world_size == 1:
        return cfg
    return replace(cfg, prompts_per_step=cfg.prompts_per_step // world_size, world_size=1)
