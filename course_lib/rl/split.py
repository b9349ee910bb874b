"""Splitting the batch: micro-batches on data-parallel ranks, and the normaliser each mode needs.

A trainer computes one batch's loss in pieces. Rank r of R holds some rows, cut into M micro-batches;
each micro-batch's gradient is accumulated (summed) on its rank, and DDP/FSDP *average* the ranks:

    grad = (1/R) sum_r sum_m grad piece_loss(r, m)

This is the full-batch gradient exactly when piece_loss(r, m) = R * sum_{its tokens} alpha_it loss_it,
with alpha the full batch's weights (``aggregation.token_weights``). Every mode's alpha divides by one
count of the *whole* batch (``DENOMINATOR``): the valid tokens (token-mean) or the non-empty
sequences (the seq-mean modes; Dr. GRPO's L_max is a constant every piece must share); token-sum
divides by nothing. So a piece takes its own aggregate, with its own count, and rescales it:

    piece_loss = R * aggregate(piece) * (count of the piece / count of the batch)   (``piece_scale``)

The batch's count is one all-reduce (``course_lib.rl.distributed`` runs it on torch.distributed).
``STRATEGIES`` holds that rule and the naive ones trainers have shipped; ``split_weights`` gives the
per-token weight each produces, by autograd, to set against ``token_weights``.
Losses: any registered loss whose per-row loss depends only on its own row (every one but Clip-Cov and
KL-Cov, ``BATCH_STATISTIC_LOSSES``) splits exactly by rows, sequence-level ones (GSPO, GMPO, LUSPO,
VESPO) included, as long as no sequence is cut in two (sequence/context parallelism would cut it).
verl 0.9.1's ``agg_loss`` is this rule with two departures (chapter 10, section 4): its trainer passes
``global_batch_size`` = every response of the mini-batch, so a response emptied by sequence-level
rejection still counts in the seq-mean modes' denominator (here it does not); and its GMPO
(``geo_mean``) takes a plain mean per micro-batch without ``agg_loss``: the "micro-mean, summed" strategy.
Chapter 10 (splitting the batch) and exercise ex16.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from ..aggregation import MODES, aggregate
from ..losses import resolve_loss
from ..masking import check_choice, check_int, check_mask, check_tensor

# What each mode divides by, counted over the whole batch: the number a split must all-reduce.
DENOMINATOR = {"token-mean": "tokens", "seq-mean-token-mean": "seqs", "seq-mean-token-sum": "seqs",
               "seq-mean-token-sum-norm": "seqs", "token-sum": None}
COUNT_INDEX = {"tokens": 0, "seqs": 1}
# Losses with a batch-level statistic inside (a covariance centred on the batch's means, a top-k
# over the batch's tokens): computed per piece they are a different loss, whatever the normaliser.
BATCH_STATISTIC_LOSSES = ("clip_cov", "kl_cov")


@dataclass(frozen=True)
class Split:
    """Which rows of the batch each micro-batch of each rank holds: rows[r][m] is a LongTensor."""
    rows: tuple[tuple[Tensor, ...], ...]

    @property
    def world_size(self) -> int:
        return len(self.rows)

    @property
    def n_micro(self) -> int:
        return len(self.rows[0])

    def rank_rows(self, rank: int) -> Tensor:
        return torch.cat(self.rows[rank])

    def sizes(self) -> list[list[int]]:
        return [[len(m) for m in rank] for rank in self.rows]


def split_from_sizes(sizes) -> Split:
    """Contiguous pieces: sizes[r][m] rows for micro-batch m of rank r, in batch order."""
    if not sizes or not all(sizes) or len({len(s) for s in sizes}) != 1:
        raise ValueError(f"sizes must be R >= 1 lists of the same number M >= 1 of row counts, got {sizes!r}")
    start, rows = 0, []
    for rank in sizes:
        pieces = []
        for n in rank:
            check_int(n, "sizes[r][m]", at_least=0)
            pieces.append(torch.arange(start, start + n))
            start += n
        rows.append(tuple(pieces))
    return Split(tuple(rows))


def _cut(n: int, parts: int, g: torch.Generator, min_size: int) -> list[int]:
    """n split into `parts` random sizes, each >= min_size (n >= parts * min_size)."""
    extra = n - parts * min_size
    cuts = sorted(torch.randint(0, extra + 1, (parts - 1,), generator=g).tolist())
    bounds = [0, *cuts, extra]
    return [min_size + bounds[i + 1] - bounds[i] for i in range(parts)]


def random_split(batch_size: int, world_size: int, n_micro: int, generator: torch.Generator,
                 *, group_size: int | None = None) -> Split:
    """A random uneven contiguous split: every rank gets >= 1 row (or whole groups of group_size
    rows when given), micro-batches may be empty."""
    check_int(world_size, "world_size")
    check_int(n_micro, "n_micro")
    unit = group_size or 1
    if batch_size % unit or batch_size // unit < world_size:
        raise ValueError(f"batch_size={batch_size} must hold world_size={world_size} ranks of whole "
                         f"groups of {unit} rows")
    ranks = [u * unit for u in _cut(batch_size // unit, world_size, generator, 1)]
    return split_from_sizes([_cut(n, n_micro, generator, 0) for n in ranks])


def even_split(batch_size: int, world_size: int, n_micro: int) -> Split:
    """Equal row counts everywhere (batch_size divisible by world_size * n_micro)."""
    if batch_size % (world_size * n_micro):
        raise ValueError(f"batch_size={batch_size} is not divisible by world_size * n_micro = "
                         f"{world_size * n_micro}")
    n = batch_size // (world_size * n_micro)
    return split_from_sizes([[n] * n_micro for _ in range(world_size)])


def local_counts(mask: Tensor) -> Tensor:
    """(valid tokens, non-empty sequences) of a mask [b, T] as float64 [2]: what a rank all-reduces."""
    check_tensor(mask, "mask", ndim=2)
    return torch.stack([mask.sum(), mask.any(dim=1).sum()]).to(torch.float64)


def _count(counts: Tensor, mode: str) -> float:
    kind = DENOMINATOR[mode]
    return 1.0 if kind is None else float(counts[COUNT_INDEX[kind]])


def piece_scale(mask: Tensor, mode: str, global_counts: Tensor, world_size: int) -> float:
    """R * (the piece's count / the batch's count) of what ``mode`` divides by: the factor that
    turns the piece's own aggregate into its exact share of the full batch's loss, under DDP's
    average."""
    check_choice(mode, "mode", sorted(MODES))
    total = _count(global_counts, mode)
    return 0.0 if total == 0 else world_size * _count(local_counts(mask), mode) / total


def _check_max_len(mode: str, max_len) -> None:
    if mode == "seq-mean-token-sum-norm" and max_len is None:
        raise ValueError("max_len must be given for seq-mean-token-sum-norm under a split: every piece "
                         "must divide by the same L_max (the generation budget), not its own padding")


def piece_loss(loss_tok: Tensor, mask: Tensor, mode: str, global_counts: Tensor, world_size: int,
               max_len: int | None = None) -> Tensor:
    """One micro-batch's loss on one rank, loss_tok/mask [b, T] -> scalar: summed over micro-batches
    and averaged over ranks it is ``aggregate`` of the full batch, value and gradient."""
    _check_max_len(mode, max_len)
    return aggregate(loss_tok, mask, mode, max_len) * piece_scale(mask, mode, global_counts, world_size)


def piece_policy_loss(loss, logp, old_logp, adv, mask, *, agg: str, global_counts: Tensor,
                      world_size: int, max_len: int | None = None, **kwargs) -> Tensor:
    """``piece_loss`` for a registered policy loss (name or callable): its own aggregate, rescaled."""
    _check_max_len(agg, max_len)
    value, _ = resolve_loss(loss)(logp, old_logp, adv, mask, agg=agg, max_len=max_len, **kwargs)
    return value * piece_scale(mask, agg, global_counts, world_size)


# ---------------------------------------------------------------------------------------------
# the rule and the naive ones: each maps a piece's context to (scale of its own aggregate, L_max)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    """What a piece can know: its mode's count, its rank's, the batch's; R, M; L_max; its longest row."""
    local: float
    rank: float
    total: float
    world_size: int
    n_micro: int
    max_len: int
    longest: int


def _share(a: float, b: float) -> float:
    return 0.0 if b == 0 else a / b


STRATEGIES: dict[str, Callable[[Piece], tuple[float, int]]] = {
    # the rule: the batch's count (all-reduced), times R against DDP's average
    "exact": lambda p: (p.world_size * _share(p.local, p.total), p.max_len),
    # each micro-batch's own mean, accumulated as it is (NeMo Automodel #3846: x accumulation steps)
    "micro-mean, summed": lambda p: (1.0, p.max_len),
    # each micro-batch's own mean divided by M (the classic loss / gradient_accumulation_steps)
    "micro-mean / M": lambda p: (1.0 / p.n_micro, p.max_len),
    # each rank's own mean, right within the rank, then DDP's average of the rank means
    "rank-mean": lambda p: (_share(p.local, p.rank), p.max_len),
    # each rank's own mean multiplied by R (NeMo Automodel #3846 / PR #3830: x dp_size)
    "rank-mean x R": lambda p: (p.world_size * _share(p.local, p.rank), p.max_len),
    # the batch's count but no factor R: DDP's average shrinks it (VeOmni #338: sp_size too small)
    "global count, no x R": lambda p: (_share(p.local, p.total), p.max_len),
    # Dr. GRPO's L_max taken from the micro-batch's own padded length instead of the budget
    "L_max = piece padding": lambda p: (p.world_size * _share(p.local, p.total), max(p.longest, 1)),
}


def make_piece(mask: Tensor, rank_counts: Tensor, global_counts: Tensor, mode: str, world_size: int,
               n_micro: int, max_len: int) -> Piece:
    """The context of one micro-batch (mask [b, T]) from its rank's and the batch's ``local_counts``."""
    longest = int(mask.sum(dim=1).max()) if mask.shape[0] else 0
    return Piece(_count(local_counts(mask), mode), _count(rank_counts, mode), _count(global_counts, mode),
                 world_size, n_micro, max_len, longest)


def _pieces(mask: Tensor, split: Split, mode: str, max_len: int):
    """Yield (rank, rows, Piece) for every micro-batch of the split."""
    total = local_counts(mask)
    for r, rank in enumerate(split.rows):
        rank_counts = local_counts(mask[split.rank_rows(r)])
        for rows in rank:
            yield r, rows, make_piece(mask[rows], rank_counts, total, mode, split.world_size,
                                      split.n_micro, max_len)


def _check_split(split: Split, batch_size: int) -> None:
    rows = torch.cat([torch.cat(rank) for rank in split.rows])
    if sorted(rows.tolist()) != list(range(batch_size)):
        raise ValueError(f"split must cover each of the batch's {batch_size} rows exactly once, "
                         f"got sizes {split.sizes()}")


def split_loss(loss_tok: Tensor, mask: Tensor, split: Split, mode: str, strategy: str = "exact",
               max_len: int | None = None) -> Tensor:
    """What the pieces add up to, (1/R) sum_r sum_m piece loss, in one process: loss_tok [B, T] -> scalar.

    Its gradient is the one DDP's average of the ranks' accumulated gradients holds.
    """
    check_tensor(loss_tok, "loss_tok", ndim=2, floating=True)
    check_mask(mask, loss_tok, "loss_tok")
    check_choice(strategy, "strategy", list(STRATEGIES))
    check_choice(mode, "mode", sorted(MODES))
    _check_split(split, mask.shape[0])
    L = mask.shape[1] if max_len is None else max_len
    total = loss_tok.new_zeros(())
    for _, rows, piece in _pieces(mask, split, mode, L):
        scale, piece_max_len = STRATEGIES[strategy](piece)
        total = total + aggregate(loss_tok[rows], mask[rows], mode, piece_max_len) * scale
    return total / split.world_size


def split_weights(mask: Tensor, split: Split, mode: str, strategy: str = "exact",
                  max_len: int | None = None) -> Tensor:
    """The weight [B, T] each token gets under the split, by autograd (compare ``token_weights``)."""
    x = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    (w,) = torch.autograd.grad(split_loss(x, mask, split, mode, strategy, max_len), x)
    return w


def split_policy_loss(loss, logp, old_logp, adv, mask, split: Split, *, agg: str,
                      max_len: int | None = None, is_weight: Tensor | None = None, **kwargs) -> Tensor:
    """The exact rule for a policy loss in one process: (1/R) sum_r sum_m piece_policy_loss.

    The row tensors (logp, old_logp, adv, mask, is_weight) are cut by rows; kwargs reach each piece whole.
    """
    _check_split(split, mask.shape[0])
    counts = local_counts(mask)
    total = logp.new_zeros(())
    for rank in split.rows:
        for rows in rank:
            w = None if is_weight is None else is_weight[rows]
            total = total + piece_policy_loss(loss, logp[rows], old_logp[rows], adv[rows], mask[rows],
                                              agg=agg, global_counts=counts, world_size=split.world_size,
                                              max_len=max_len, is_weight=w, **kwargs)
    return total / split.world_size


def gradient_ratio(got: Tensor, want: Tensor) -> tuple[float, float]:
    """(|got| / |want|, cosine of the angle between them): 2.00 and 1.00 is a pure factor of two."""
    got, want = got.reshape(-1).double(), want.reshape(-1).double()
    norm = float(want.norm())
    if norm == 0:
        raise ValueError("want must be a non-zero gradient")
    cos = float(got @ want) / max(float(got.norm()) * norm, 1e-300)
    return float(got.norm()) / norm, cos


# ---------------------------------------------------------------------------------------------
# group statistics under a split
# ---------------------------------------------------------------------------------------------
def groups_whole(split: Split, group_size: int) -> bool:
    """True when every group (contiguous rows g*G ... g*G+G-1) lies on one rank."""
    check_int(group_size, "group_size")
    owner = {}
    for r in range(split.world_size):
        for g in (split.rank_rows(r) // group_size).tolist():
            if owner.setdefault(g, r) != r:
                return False
    return True


@torch.no_grad()
def rank_group_advantages(rewards: Tensor, split: Split, group_size: int, eps: float = 1e-6) -> Tensor:
    """GRPO's advantage [B] computed on each rank from the rewards it holds: a group cut by the
    split gets each part's own mean and std (equal to ``group_advantages`` when groups are whole)."""
    check_tensor(rewards, "rewards", ndim=1, floating=True)
    _check_split(split, rewards.numel())
    adv = torch.zeros_like(rewards)
    for r in range(split.world_size):
        rows = split.rank_rows(r)
        for g in torch.unique(rows // group_size):
            part = rows[rows // group_size == g]
            x = rewards[part]
            centred = x - x.mean()
            if len(x) > 1 and bool((x != x[0]).any()):
                adv[part] = centred / (x.std() + eps)
    return adv


def moments(x: Tensor) -> Tensor:
    """(count, sum, sum of squares) of x as float64 [3]: all-reduced, they give the batch's std."""
    x = x.reshape(-1).to(torch.float64)
    return torch.stack([x.new_tensor(float(x.numel())), x.sum(), (x * x).sum()])


def std_from_moments(m: Tensor) -> float:
    """The Bessel-corrected std of the values whose ``moments`` were summed into m [3]."""
    n, s, ss = (float(v) for v in m)
    if n < 2:
        raise ValueError(f"a std needs at least 2 values, got count {n:g}")
    return max(ss - s * s / n, 0.0) ** 0.5 / (n - 1) ** 0.5


# ---------------------------------------------------------------------------------------------
# the chapter's tables
# ---------------------------------------------------------------------------------------------
def spread_lengths(batch_size: int, mean_len: int, spread: float, seed: int = 0) -> Tensor:
    """Response lengths [B]: mean_len * exp(spread * z), z standard normal, rounded, in [1, 4 mean_len].
    spread 0 gives equal lengths."""
    check_int(batch_size, "batch_size")
    check_int(mean_len, "mean_len")
    z = torch.randn(batch_size, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (mean_len * torch.exp(spread * z)).round().clamp(1, 4 * mean_len).long()


def ratio_rows(mask: Tensor, split: Split, max_len: int, modes=None, strategies=None) -> list[list]:
    """[mode, strategy, |g_split| / |g_full|, cosine, lowest and highest ratio of a token's weight to its
    full-batch weight] of every strategy, from the gradient with respect to each token's loss."""
    from ..aggregation import token_weights
    rows = []
    for mode in modes or list(MODES):
        full = token_weights(mask, mode, max_len)
        for strategy in strategies or list(STRATEGIES):
            w = split_weights(mask, split, mode, strategy, max_len)
            norm, cos = gradient_ratio(w, full)
            per_token = w[mask] / full[mask]
            rows.append([mode, strategy, norm, cos, float(per_token.min()), float(per_token.max())])
    return rows
