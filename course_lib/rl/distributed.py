"""The split run for real: torch.distributed (gloo, CPU processes), DDP averaging the ranks' gradients.

``run_ranks`` (from ``course_lib.ranks``, the launcher the toy trainer uses too) starts R processes in
one gloo process group and returns what each rank returned. NCCL on GPUs is the same code with another
backend name.

``ddp_gradients`` is one such run: a small logit model (a linear map from features to V logits, the
sampled token's log-probability as ``logp``) wrapped in DistributedDataParallel; for each case every
rank all-reduces its ``split.local_counts``, accumulates its micro-batches under ``no_sync`` and lets
DDP average the last backward; rank 0 returns the averaged gradient. ``full_batch_gradient`` and
``one_process_gradient`` are the references, in this process.
Chapter 10 (splitting the batch); tests/test_distributed.py.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import Tensor

from . import split as S
from ..losses import resolve_loss
from ..ranks import run_ranks
from .data_parallel import DataParallel
from .device import read_back
from .loss_step import loss_setup
from .model import build_model
from .rollout import Batch
from .trainer import learn
from .registry import make_task

FEATURES, VOCAB = 6, 5        # the logit model: W [VOCAB, FEATURES]


@dataclass(frozen=True)
class GradCase:
    """One gradient to compute: a loss, its aggregation, a split (sizes[r][m]) and a strategy."""
    loss: str
    mode: str
    sizes: tuple[tuple[int, ...], ...]
    strategy: str = "exact"


# ---------------------------------------------------------------------------------------------
# the batch and the model
# ---------------------------------------------------------------------------------------------
def make_batch(seed: int, batch_size: int = 16, T: int = 8, *, max_len: int = 12) -> dict:
    """A float64 batch for the logit model: features [B, T, F], tokens [B, T], a nearby old_logp,
    adv [B], an IS weight, uneven lengths in [0, T] (row 1 empty) and the model's weight W0."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (batch_size,), generator=g)
    lengths[1] = 0
    model = torch.randn(VOCAB, FEATURES, generator=g, dtype=torch.float64) * 0.5
    x = torch.randn(batch_size, T, FEATURES, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, VOCAB, (batch_size, T), generator=g)
    mask = torch.arange(T)[None] < lengths[:, None]
    logp0 = logp_of(model, x, tokens)
    return {"x": x, "tokens": tokens, "mask": mask, "W0": model, "max_len": max_len,
            "old_logp": logp0 + 0.2 * torch.randn(batch_size, T, generator=g, dtype=torch.float64),
            "adv": torch.randn(batch_size, generator=g, dtype=torch.float64),
            "is_weight": torch.rand(batch_size, T, generator=g, dtype=torch.float64) + 0.5,
            "rewards": torch.randint(0, 2, (batch_size,), generator=g).double()}


def logp_of(weight: Tensor, x: Tensor, tokens: Tensor) -> Tensor:
    """log pi(token) [b, T] of the logit model: log_softmax(x W^T) at each sampled token."""
    logits = x @ weight.T                                                   # [b, T, V]
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None])[..., 0]


class LogitModel(torch.nn.Module):
    def __init__(self, weight: Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(weight.clone())

    def forward(self, x: Tensor, tokens: Tensor) -> Tensor:
        return logp_of(self.weight, x, tokens)


def _piece_value(model, batch: dict, rows: Tensor, case: GradCase, piece: S.Piece) -> Tensor:
    """The piece's own aggregate of its loss times the strategy's scale."""
    scale, max_len = S.STRATEGIES[case.strategy](piece)
    logp = model(batch["x"][rows], batch["tokens"][rows])
    value, _ = resolve_loss(case.loss)(logp, batch["old_logp"][rows], batch["adv"][rows],
                                       batch["mask"][rows], agg=case.mode, max_len=max_len,
                                       is_weight=batch["is_weight"][rows])
    return value * scale


def full_batch_gradient(batch: dict, loss: str, mode: str) -> Tensor:
    """d loss / d W [V, F] of the whole batch in one process: the number every split must give."""
    model = LogitModel(batch["W0"])
    value, _ = resolve_loss(loss)(model(batch["x"], batch["tokens"]), batch["old_logp"], batch["adv"],
                                  batch["mask"], agg=mode, max_len=batch["max_len"],
                                  is_weight=batch["is_weight"])
    value.backward()
    return model.weight.grad


def one_process_gradient(batch: dict, case: GradCase) -> Tensor:
    """What DDP should hold after the split run of ``case``, computed rank by rank in this process."""
    model, split, mask = LogitModel(batch["W0"]), S.split_from_sizes(case.sizes), batch["mask"]
    total = S.local_counts(mask)
    for r, rank in enumerate(split.rows):
        rank_counts = S.local_counts(mask[split.rank_rows(r)])
        for rows in rank:
            piece = S.make_piece(mask[rows], rank_counts, total, case.mode, split.world_size,
                                 split.n_micro, batch["max_len"])
            (_piece_value(model, batch, rows, case, piece) / split.world_size).backward()
    return model.weight.grad


def _ddp_rank(rank: int, world_size: int, payload: dict) -> dict:
    """On one rank: each case's DDP-averaged gradient, and the batch std from all-reduced moments.
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    batch, cases = payload["batch"], payload["cases"]
    ddp = DDP(LogitModel(batch["W0"]))
    grads = []
    for case in cases:
        split = S.split_from_sizes(case.sizes)
        if split.world_size != world_size:
            raise ValueError(f"case {case} is split over {split.world_size} ranks, "
                             f"not {world_size}")
        mask = batch["mask"]
        rank_counts = S.local_counts(mask[split.rank_rows(rank)])
        total = rank_counts.clone()
        dist.all_reduce(total)                                  # the batch's tokens and sequences
        ddp.zero_grad(set_to_none=False)
        for m, rows in enumerate(split.rows[rank]):
            last = m == split.n_micro - 1
            with contextlib.nullcontext() if last else ddp.no_sync():   # accumulate; sync the last
                piece = S.make_piece(mask[rows], rank_counts, total, case.mode, world_size,
                                     split.n_micro, batch["max_len"])
                _piece_value(ddp, batch, rows, case, piece).backward()
        grads.append(ddp.module.weight.grad.clone())
    moments = S.moments(batch["rewards"][S.split_from_sizes(cases[0].sizes).rank_rows(rank)])
    dist.all_reduce(moments)
    return {"grads": grads if rank == 0 else None, "std": S.std_from_moments(moments)}


def ddp_gradients(batch: dict, cases: list[GradCase], world_size: int, *, timeout_s: float = 120.0):
    """Rank 0's DDP-averaged gradient [V, F] for each case, and the batch std every rank computed."""
    results = run_ranks(_ddp_rank, world_size, {"batch": batch, "cases": list(cases)}, timeout_s=timeout_s)
    return results[0]["grads"], [r["std"] for r in results]


def every_loss_cases(world_size: int, seed: int = 0, batch_size: int = 16) -> list[GradCase]:
    """Every registered loss that splits by rows (``split.BATCH_STATISTIC_LOSSES`` aside) in every mode,
    on random uneven splits whose micro-batch count cycles through 1-4 (empty micro-batches occur)."""
    from ..aggregation import MODES
    from ..losses import FRAMEWORK_LOSSES, LOSSES
    g = torch.Generator().manual_seed(seed)
    names = sorted(n for n in {**LOSSES, **FRAMEWORK_LOSSES} if n not in S.BATCH_STATISTIC_LOSSES)
    cases = []
    for i, (name, mode) in enumerate((n, m) for n in names for m in sorted(MODES)):
        sizes = S.random_split(batch_size, world_size, 1 + i % 4, g).sizes()
        cases.append(GradCase(name, mode, tuple(map(tuple, sizes))))
    return cases


# ---------------------------------------------------------------------------------------------
# the toy trainer's first update, split over ranks (tests/test_toy_split.py, chapter 10)
# ---------------------------------------------------------------------------------------------
def toy_first_update(cfg, model_state: dict, ref_state: dict, batch, *, lr: float = 0.05, dp=None,
                     metrics: bool = False):
    """The parameter gradient of ``trainer.learn``'s first optimiser step on ``batch`` (this rank's share
    when ``dp`` is given), from a TinyGPT of the config's shape with weights ``model_state``; with
    ``metrics``, (gradient, learn's metrics read back: over ranks, ``reduce_over_ranks``'s)."""
    import copy as _copy

    class Recorder(torch.optim.SGD):
        def __init__(self, params):
            super().__init__(params, lr=lr)
            self.grads = []

        def step(self, closure=None):
            if not self.grads:
                self.grads.append([p.grad.detach().clone() for p in self.param_groups[0]["params"]])
            return super().step(closure)
    model = build_model(cfg)
    model.load_state_dict(model_state)
    ref_model = _copy.deepcopy(model).requires_grad_(False)
    ref_model.load_state_dict(ref_state)
    if dp is not None:
        from torch.nn.parallel import DistributedDataParallel as DDP
        dp = DataParallel(dp[0], dp[1], DDP(model))
    opt = Recorder(model.trainable_parameters())
    out = learn(cfg, loss_setup(cfg), model, ref_model, opt, batch, torch.Generator().manual_seed(7), lambda: lr,
                dp=dp)
    return (opt.grads[0], read_back(out)) if metrics else opt.grads[0]


def _toy_rank(rank: int, world_size: int, payload: dict) -> list:
    """Each config's first-update gradient on this rank's contiguous share of the batch (whole groups)."""
    from dataclasses import replace as _replace

    b = payload["batch"]
    n = len(b.rewards) // world_size
    rows = slice(rank * n, (rank + 1) * n)
    share = Batch(b.prompts[rows], b.responses[rows], b.mask[rows], b.rollout_logp[rows], b.rewards[rows],
                  b.eos_id, b.pad_id)
    out = []
    for cfg in payload["configs"]:
        local = _replace(cfg, prompts_per_step=cfg.prompts_per_step // world_size, world_size=1)
        out.append(toy_first_update(local, payload["model"], payload["ref"], share, dp=(rank, world_size),
                                    metrics=payload["metrics"]))
    return out if rank == 0 else None


def toy_first_updates(configs: list, model_state: dict, ref_state: dict, batch, world_size: int, *,
                      timeout_s: float = 300.0, metrics: bool = False) -> list:
    """Rank 0's DDP-averaged first-update gradient of each config (its ``world_size`` and
    ``micro_batches``) on ``batch`` split over ``world_size`` gloo processes; with ``metrics``, each as
    (gradient, the metrics rank 0 logs)."""
    payload = {"configs": list(configs), "model": model_state, "ref": ref_state, "batch": batch,
               "metrics": metrics}
    return run_ranks(_toy_rank, world_size, payload, timeout_s=timeout_s)[0]


def toy_batch(cfg, seed: int = 0):
    """(model weights, reference weights, Batch) for ``toy_first_update``: a fresh policy of the config's
    shape with spread logits, P x G responses it samples for the task's held-out prompts, a sampler whose
    log-probs are off the learner's (ratios away from 1), and 0/1 rewards with one zero-signal group."""
    torch.manual_seed(seed)
    model = build_model(cfg)
    with torch.no_grad():
        model.head.weight.mul_(40.0)
    ref = {k: v + 0.05 * torch.randn(v.shape, generator=torch.Generator().manual_seed(seed + 1))
           for k, v in model.state_dict().items()}
    P, G = cfg.prompts_per_step, cfg.group_size
    prompts = make_task(cfg).prompts("heldout")[:P].repeat_interleave(G, dim=0)           # [B, Lp]
    roll = model.rollout(prompts, cfg.max_new_tokens, generator=torch.Generator().manual_seed(seed + 2))
    noise = 0.4 * torch.randn(roll.rollout_logp.shape, generator=torch.Generator().manual_seed(seed + 3))
    rewards = torch.randint(0, 2, (P * G,), generator=torch.Generator().manual_seed(seed + 4)).float()
    rewards[:G] = 0.0                                                                     # no signal
    batch = Batch(prompts, roll.responses, roll.mask, (roll.rollout_logp + noise) * roll.mask, rewards,
                  model.eos_id, model.pad_id)
    return model.state_dict(), ref, batch
