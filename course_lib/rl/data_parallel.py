"""A data-parallel run's plumbing (``trainer.train_distributed``): this process's rank, the learner
wrapped in DDP, each rank's share of a config, and the step's metrics made the same on every rank.

Every function is the identity, or close to it, in one process (``dp`` None, world size 1).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from .config import RunConfig
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
    other one by the mean of the ranks' values. The trainer hands it token means already weighted by
    each rank's share of the tokens (``split_backward``, ``token_means_over_ranks``), so that mean is
    the whole batch's, as in one process; a quantile (the mismatch p99) is the mean of the ranks'.
    Identity in one process."""
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


def token_means_over_ranks(metrics: dict, keys, mask: Tensor, dp: DataParallel | None) -> dict:
    """``metrics`` with those of ``keys`` that are tensors, token means over this rank's ``mask``
    [b, T], times R * n_rank / n (n: the valid tokens of every rank): their mean over the ranks
    (``reduce_over_ranks``) is then the whole batch's token mean. Identity in one process."""
    if dp is None:
        return metrics
    import torch.distributed as dist
    n = mask.sum().to(torch.float64).reshape(1)
    total = n.clone()
    dist.all_reduce(total)                                                     # the batch's tokens
    w = (dp.world_size * n / total)[0]
    return {k: v * w if k in keys and isinstance(v, Tensor) else v for k, v in metrics.items()}


def _all_gather_cat(t: Tensor, dp: DataParallel) -> Tensor:
    """Every rank's ``t`` (same shape on each) concatenated along dim 0 in rank order."""
    import torch.distributed as dist
    parts = [torch.empty_like(t) for _ in range(dp.world_size)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts)


def gather_collected(got: Collected, dp: DataParallel | None) -> Collected:
    """One step's sampling on every rank as one Collected (its per-response tensors all-gathered, its
    time and tokens this rank's), so the sampling metrics are the whole batch's. Identity in one process."""
    if dp is None:
        return got
    gathered = [_all_gather_cat(t, dp) for t in (got.rewards, got.correct, got.lengths, got.truncated)]
    return Collected(None, *gathered, got.seconds, got.tokens, got.flops)


def whole_batch(rewards: Tensor, mask: Tensor, dp: DataParallel | None) -> tuple[Tensor, Tensor, slice]:
    """Every rank's rewards [b] and masks [b, T_r] all-gathered in rank order, the masks padded with
    False to the longest T: (rewards [R * b], mask [R * b, T_max], this rank's rows in them). What an
    estimator whose statistics span the batch (``config.BATCH_WIDE_ESTIMATORS``) reads, so that each
    rank gets the full batch's advantages of its own rows. Identity in one process."""
    if dp is None:
        return rewards, mask, slice(None)
    import torch.distributed as dist
    T = torch.tensor([mask.shape[1]])
    dist.all_reduce(T, op=dist.ReduceOp.MAX)
    padded = torch.nn.functional.pad(mask, (0, int(T) - mask.shape[1]), value=False)     # [b, T_max]
    b = len(rewards)
    return (_all_gather_cat(rewards, dp), _all_gather_cat(padded, dp),
            slice(dp.rank * b, (dp.rank + 1) * b))


def this_rank(cfg: RunConfig) -> int:
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


def rank_share(cfg: RunConfig, world_size: int) -> RunConfig:
    """The config one rank runs: prompts_per_step / world_size groups, as one process."""
    if world_size == 1:
        return cfg
    return replace(cfg, prompts_per_step=cfg.prompts_per_step // world_size, world_size=1)
