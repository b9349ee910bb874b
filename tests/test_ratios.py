"""course_lib.ratios: log-ratio, clip bounds, the clipped surrogate, clip statistics."""
import math

import pytest
import torch

import reference as ref
from batches import DTYPES, POISONS, SEEDS, make_batch, poison, tol
from course_lib import ratios


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_log_ratio_matches_reference_with_zero_padding(seed, dtype):
    bt = make_batch(seed, dtype, holes=True)
    mask = bt["mask"]
    got = ratios.log_ratio(bt["logp"], bt["old_logp"], mask)
    torch.testing.assert_close(got.double(), _t(ref.log_ratio(bt["logp"].tolist(), bt["old_logp"].tolist(),
                                                              mask.tolist())), **tol(dtype))
    assert torch.all(got[~mask] == 0)


@pytest.mark.parametrize("kind", POISONS)
def test_log_ratio_ignores_poisoned_padding_and_clamps_at_20(kind):
    bt = make_batch(0, torch.float32)
    mask = bt["mask"]
    logp = poison(bt["logp"], mask, kind).requires_grad_(True)
    got = ratios.log_ratio(logp, poison(bt["old_logp"], mask, kind, seed=9), mask)
    assert torch.equal(got, ratios.log_ratio(bt["logp"], bt["old_logp"], mask))
    (g,) = torch.autograd.grad(torch.exp(got).sum(), logp)
    assert torch.all(g[~mask] == 0) and torch.isfinite(g).all()
    one_row = torch.ones(1, 2, dtype=torch.bool)
    big = ratios.log_ratio(torch.tensor([[50.0, -50.0]]), torch.zeros(1, 2), one_row)
    assert big.tolist() == [[20.0, -20.0]]


def test_clip_bounds_none_means_unbounded():
    assert ratios.clip_bounds(0.2, 0.28) == pytest.approx((0.8, 1.28))
    assert ratios.clip_bounds(None, 0.2) == (0.0, pytest.approx(1.2))
    assert ratios.clip_bounds(0.2, None) == (pytest.approx(0.8), math.inf)


@pytest.mark.parametrize("dual_clip", [None, 3.0])
@pytest.mark.parametrize("eps", [(0.2, 0.2), (0.2, 0.28), (0.1, 0.5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_clipped_surrogate_value_and_gradient_match_case_table(dtype, eps, dual_clip):
    eps_low, eps_high = eps
    # ratios on both sides of every bound (none exactly on a kink), both signs of A
    r_vals = [0.3, 0.79, 0.81, 1.0, 1.19, 1.21, 1.27, 1.29, 1.6, 2.9, 3.1, 6.0]
    ratio = torch.tensor([r_vals, r_vals], dtype=dtype, requires_grad=True)
    adv = torch.tensor([[1.5] * len(r_vals), [-0.7] * len(r_vals)], dtype=dtype)
    loss = ratios.clipped_surrogate(ratio, adv, eps_low, eps_high, dual_clip)
    expected = [[ref.ppo_token_loss(r, a, eps_low, eps_high, dual_clip) for r in r_vals] for a in (1.5, -0.7)]
    torch.testing.assert_close(loss.double(), _t(expected), **tol(dtype))
    (g,) = torch.autograd.grad(loss.sum(), ratio)
    # d loss / d r = -c / r, since c is the coefficient on d log pi = d r / r
    expected_g = [[-ref.ppo_coefficient(r, a, eps_low, eps_high, dual_clip) / r for r in r_vals]
                  for a in (1.5, -0.7)]
    torch.testing.assert_close(g.double(), _t(expected_g), **tol(dtype))


def test_dual_clip_caps_negative_advantage_loss_at_c_times_minus_a():
    ratio = torch.tensor([[2.0, 3.5, 10.0]])
    adv = torch.full((1, 3), -1.0)
    assert ratios.clipped_surrogate(ratio, adv, 0.2, 0.2, 3.0).tolist() == [[2.0, 3.0, 3.0]]
    assert ratios.clipped_surrogate(ratio, adv, 0.2, 0.2, None).tolist() == [[2.0, 3.5, 10.0]]
    # positive advantages are never touched by the dual clip
    assert torch.equal(ratios.clipped_surrogate(ratio, -adv, 0.2, 0.2, 3.0),
                       ratios.clipped_surrogate(ratio, -adv, 0.2, 0.2, None))


@pytest.mark.parametrize("eps", [(0.2, 0.2), (0.2, 0.28), (None, 0.28), (None, None)])
@pytest.mark.parametrize("seed", SEEDS)
def test_clip_stats_match_loop_counts(seed, eps):
    gen = torch.Generator().manual_seed(seed)
    ratio = torch.exp(0.5 * torch.randn(8, 16, generator=gen, dtype=torch.float64))
    adv_tok = torch.randn(8, 16, generator=gen, dtype=torch.float64)
    mask = torch.rand(8, 16, generator=gen) < 0.7
    got = ratios.clip_stats(ratio, adv_tok, mask, *eps)
    expected = ref.clip_stats(ratio.tolist(), adv_tok.tolist(), mask.tolist(), *eps)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert isinstance(got[key], float)
        # the fractions are float32 means of 0/1 flags: float32 precision
        assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-12), key
    if eps == (0.2, 0.2):                                  # the batch really exercises both clip sides
        assert got["clip/low_frac"] > 0 and got["clip/high_frac"] > 0


def test_clip_stats_of_an_empty_mask_are_zero_and_prefix_renames_clip_keys():
    ratio = torch.ones(2, 3)
    stats = ratios.clip_stats(ratio, ratio, torch.zeros(2, 3, dtype=torch.bool), 0.2, 0.2, prefix="clip_seq")
    assert stats == {"clip_seq/low_frac": 0.0, "clip_seq/high_frac": 0.0, "ratio/outside_frac": 0.0,
                     "ratio/mean": 0.0, "ratio/max": 0.0}


@pytest.mark.parametrize("eps", [(0.2, 0.28), (None, 0.2), (0.2, None), (None, None), (10.0, 0.2)])
def test_clip_ratio_clamps_to_the_clip_range_and_none_means_unbounded(eps):
    r_vals = [1e-6, 0.3, 0.79, 0.81, 1.0, 1.19, 1.21, 1.29, 6.0, 1e6]
    got = ratios.clip_ratio(torch.tensor(r_vals, dtype=torch.float64), *eps)
    lo, hi = ref.clip_range(*eps)
    lo = max(lo, 0.0)                                      # eps_low >= 1 (verl's CISPO 10): no bound
    assert got.tolist() == pytest.approx([min(max(r, lo), hi) for r in r_vals], rel=1e-15)
