"""course_lib.rl.split: every aggregation mode and loss under micro-batches and ranks, against the full batch."""
import pytest
import torch

import reference as ref
from course_lib.rl import split as S
from course_lib.advantages import group_advantages
from course_lib.aggregation import MODES, aggregate
from course_lib.losses import FRAMEWORK_LOSSES, LOSSES

ALL_MODES = (*ref.AGG_MODES, "token-sum")
MAX_LEN = 16
SHAPES = [(1, 1), (1, 3), (2, 1), (2, 4), (4, 2), (4, 4), (3, 3)]       # (world_size, n_micro)


def _batch(seed, B=12, T=9, empty_row=True):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    if empty_row:
        lengths[B // 3] = 0                                      # a fully masked response
    mask = torch.arange(T)[None] < lengths[:, None]
    loss_tok = torch.randn(B, T, generator=g, dtype=torch.float64)
    loss_tok = torch.where(mask, loss_tok, torch.full_like(loss_tok, float("nan")))   # poisoned padding
    return g, loss_tok, mask


def _ref_weights(mask, mode):
    return torch.tensor(ref.token_weights(mask.tolist(), mode, MAX_LEN), dtype=torch.float64)


def test_the_modes_here_are_the_modes_of_aggregation():
    assert sorted(S.DENOMINATOR) == sorted(MODES) == sorted(ALL_MODES)


@pytest.mark.parametrize("world_size,n_micro", SHAPES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_split_gives_the_full_batch_value_and_token_weights(seed, world_size, n_micro):
    g, loss_tok, mask = _batch(seed)
    split = S.random_split(mask.shape[0], world_size, n_micro, g)
    for mode in ALL_MODES:
        x = loss_tok.clone().requires_grad_(True)
        value = S.split_loss(x, mask, split, mode, max_len=MAX_LEN)
        (grad,) = torch.autograd.grad(value, x)
        want = ref.aggregate(loss_tok.tolist(), mask.tolist(), mode, MAX_LEN)
        assert abs(value.item() - want) < 1e-12, (mode, split.sizes())
        torch.testing.assert_close(grad, _ref_weights(mask, mode), rtol=0, atol=1e-14)


def test_random_splits_have_empty_micro_batches_and_uneven_ranks():
    g = torch.Generator().manual_seed(5)
    sizes = [S.random_split(12, 2, 4, g).sizes() for _ in range(20)]
    assert any(0 in rank for s in sizes for rank in s)
    assert any(sum(s[0]) != sum(s[1]) for s in sizes)
    for s in sizes:
        assert sum(map(sum, s)) == 12 and all(sum(rank) >= 1 for rank in s)


def test_piece_loss_summed_over_pieces_and_averaged_over_ranks_is_aggregate():
    _, loss_tok, mask = _batch(3)
    split = S.split_from_sizes([[0, 5], [3, 0], [2, 2]])
    counts = S.local_counts(mask)
    for mode in ALL_MODES:
        total = sum(S.piece_loss(loss_tok[rows], mask[rows], mode, counts, 3, MAX_LEN)
                    for rank in split.rows for rows in rank) / 3
        torch.testing.assert_close(total, aggregate(loss_tok, mask, mode, MAX_LEN), rtol=0, atol=1e-13)


def test_a_piece_with_no_valid_token_contributes_zero_and_no_nan():
    _, loss_tok, mask = _batch(4)
    counts = S.local_counts(mask)
    for mode in ALL_MODES:
        x = loss_tok[:3].clone().requires_grad_(True)
        v = S.piece_loss(x, torch.zeros(3, 9, dtype=torch.bool), mode, counts, 2, MAX_LEN)
        (grad,) = torch.autograd.grad(v, x)
        assert v.item() == 0.0 and bool((grad == 0).all())


def test_dr_grpo_constant_must_be_given_under_a_split():
    _, loss_tok, mask = _batch(0)
    with pytest.raises(ValueError, match="max_len must be given"):
        S.piece_loss(loss_tok, mask, "seq-mean-token-sum-norm", S.local_counts(mask), 2)


def _policy_inputs(seed, B=12, T=9):
    g, _, mask = _batch(seed, B, T)
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 2 - 0.05
    logp = old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    is_weight = torch.rand(B, T, generator=g, dtype=torch.float64) + 0.5
    return g, logp, old, adv, mask, is_weight


def _full_and_split_grads(name, split, logp, old, adv, mask, mode, **kw):
    fn = {**LOSSES, **FRAMEWORK_LOSSES}[name]
    a = logp.clone().requires_grad_(True)
    full, _ = fn(a, old, adv, mask, agg=mode, max_len=MAX_LEN, **kw)
    b = logp.clone().requires_grad_(True)
    piece = S.split_policy_loss(name, b, old, adv, mask, split, agg=mode, max_len=MAX_LEN, **kw)
    return full, torch.autograd.grad(full, a)[0], piece, torch.autograd.grad(piece, b)[0]


SPLIT_EXACT = sorted(n for n in {**LOSSES, **FRAMEWORK_LOSSES} if n not in S.BATCH_STATISTIC_LOSSES)


@pytest.mark.parametrize("name", SPLIT_EXACT)
def test_every_row_local_loss_splits_exactly_in_every_mode(name):
    g, logp, old, adv, mask, is_weight = _policy_inputs(7)
    for world_size, n_micro in ((2, 3), (4, 4), (3, 1)):
        split = S.random_split(12, world_size, n_micro, g)
        for mode in ALL_MODES:
            full, gf, piece, gs = _full_and_split_grads(name, split, logp, old, adv, mask, mode,
                                                        is_weight=is_weight)
            torch.testing.assert_close(piece, full, rtol=0, atol=1e-12)
            torch.testing.assert_close(gs, gf, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", S.BATCH_STATISTIC_LOSSES)
def test_batch_statistic_losses_are_another_loss_when_split(name):
    """Clip-Cov and KL-Cov centre on the batch's means and pick a share of its tokens: per piece,
    the picks change, whatever the normaliser (the reason they are listed apart)."""
    _, logp, old, adv, mask, _ = _policy_inputs(8, B=16, T=12)
    split = S.even_split(16, 2, 2)
    kw = {"generator": torch.Generator().manual_seed(0)} if name == "clip_cov" else {}
    kw.update({"cov_ratio": 0.1, "cov_lb": -10.0, "cov_ub": 10.0} if name == "clip_cov" else {"kl_ratio": 0.1})
    _, gf, _, gs = _full_and_split_grads(name, split, logp, old, adv, mask, "token-mean", **kw)
    assert float((gs - gf).abs().max()) > 1e-4


def _equal_length_batch(B=16, T=6):
    return torch.randn(B, T, dtype=torch.float64), torch.ones(B, T, dtype=torch.bool)


@pytest.mark.parametrize("world_size,n_micro", [(2, 2), (4, 2), (2, 4)])
def test_naive_splits_scale_the_gradient_by_m_and_r_on_even_batches(world_size, n_micro):
    _, mask = _equal_length_batch()
    split = S.even_split(16, world_size, n_micro)
    want = {"micro-mean, summed": n_micro, "micro-mean / M": 1.0, "rank-mean": 1.0,
            "rank-mean x R": world_size, "global count, no x R": 1 / world_size}
    for mode in ref.AGG_MODES:
        full = _ref_weights(mask, mode)
        for strategy, factor in want.items():
            norm, cos = S.gradient_ratio(S.split_weights(mask, split, mode, strategy, MAX_LEN), full)
            assert abs(norm - factor) < 1e-12 and abs(cos - 1) < 1e-12, (mode, strategy)


def test_local_means_weight_uneven_micro_batches_wrongly():
    """With uneven lengths the per-micro-batch mean is not a rescaled full gradient: its direction
    changes (cosine < 1), so no learning-rate change repairs it."""
    _, _, mask = _batch(2)
    split = S.split_from_sizes([[2, 4], [5, 1]])
    for strategy in ("micro-mean / M", "rank-mean"):
        _, cos = S.gradient_ratio(S.split_weights(mask, split, "token-mean", strategy, MAX_LEN),
                                  _ref_weights(mask, "token-mean"))
        assert cos < 0.99, strategy


def test_dr_grpo_with_the_pieces_padding_as_l_max_is_wrong_and_others_ignore_it():
    _, _, mask = _batch(2)
    split = S.split_from_sizes([[2, 4], [5, 1]])
    w = S.split_weights(mask, split, "seq-mean-token-sum-norm", "L_max = piece padding", MAX_LEN)
    assert S.gradient_ratio(w, _ref_weights(mask, "seq-mean-token-sum-norm"))[0] > 1.2
    w = S.split_weights(mask, split, "token-mean", "L_max = piece padding", MAX_LEN)
    torch.testing.assert_close(w, _ref_weights(mask, "token-mean"), rtol=0, atol=1e-14)


def test_token_sum_needs_only_the_factor_r():
    _, _, mask = _batch(1)
    split = S.split_from_sizes([[3, 3], [1, 5]])
    full = _ref_weights(mask, "token-sum")
    torch.testing.assert_close(S.split_weights(mask, split, "token-sum", "rank-mean x R"), full)
    assert abs(S.gradient_ratio(S.split_weights(mask, split, "token-sum", "micro-mean, summed"), full)[0]
               - 0.5) < 1e-12


def test_split_must_cover_every_row_once():
    _, loss_tok, mask = _batch(0)
    with pytest.raises(ValueError, match="exactly once"):
        S.split_loss(loss_tok, mask, S.split_from_sizes([[5], [5]]), "token-mean")
    with pytest.raises(ValueError, match="strategy must be one of"):
        S.split_loss(loss_tok, mask, S.even_split(12, 2, 2), "token-mean", "mean")
    with pytest.raises(ValueError, match="sizes must be"):
        S.split_from_sizes([[1, 2], [3]])


def test_group_advantages_need_whole_groups_on_a_rank():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randint(0, 2, (16,), generator=g).double() + 0.1 * torch.arange(16).double()
    whole = S.random_split(16, 2, 3, g, group_size=4)
    assert S.groups_whole(whole, 4)
    torch.testing.assert_close(S.rank_group_advantages(rewards, whole, 4), group_advantages(rewards, 4))
    cut = S.split_from_sizes([[3, 3], [5, 5]])                   # group 1 (rows 4-7) lies on both ranks
    assert not S.groups_whole(cut, 4)
    diff = (S.rank_group_advantages(rewards, cut, 4) - group_advantages(rewards, 4)).abs()
    assert float(diff[4:8].max()) > 0.1 and float(diff[8:].max()) < 1e-12


def test_batch_std_from_summed_moments_is_the_full_batch_std():
    x = torch.randn(23, dtype=torch.float64)
    parts = (x[:5], x[5:5], x[5:17], x[17:])
    total = sum(S.moments(p) for p in parts)
    assert abs(S.std_from_moments(total) - float(x.std())) < 1e-13
    mean_of_part_stds = sum(float(p.std()) for p in (x[:5], x[5:17], x[17:])) / 3
    assert abs(mean_of_part_stds - float(x.std())) > 1e-3


def test_gradient_ratio_reports_scale_and_direction():
    v = torch.tensor([1.0, 2.0, 2.0])
    assert S.gradient_ratio(2 * v, v) == pytest.approx((2.0, 1.0))
    with pytest.raises(ValueError, match="non-zero"):
        S.gradient_ratio(v, torch.zeros(3))
