"""course_lib.masking: input validation and NaN-safe masked reductions."""
import pytest
import torch

import reference as ref
from batches import DTYPES, POISONS, SEEDS, make_batch, poison, tol
from course_lib import masking


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_masked_sum_and_mean_match_loop_reference(seed, dtype):
    bt = make_batch(seed, dtype, holes=True)
    x, mask = bt["logp"], bt["mask"]
    xs, ms = x.tolist(), mask.tolist()
    torch.testing.assert_close(masking.masked_sum(x, mask).double(),
                               torch.tensor(ref.masked_sum(xs, ms), dtype=torch.float64), **tol(dtype))
    torch.testing.assert_close(masking.masked_mean(x, mask).double(),
                               torch.tensor(ref.masked_mean(xs, ms), dtype=torch.float64), **tol(dtype))
    torch.testing.assert_close(masking.masked_sum(x, mask, dim=-1).double(),
                               torch.tensor(ref.masked_row_sums(xs, ms), dtype=torch.float64),
                               **tol(dtype))
    torch.testing.assert_close(masking.masked_mean(x, mask, dim=-1).double(),
                               torch.tensor(ref.masked_row_means(xs, ms), dtype=torch.float64),
                               **tol(dtype))


def test_masked_mean_of_empty_row_and_empty_batch_is_zero():
    x = torch.randn(2, 3)
    mask = torch.tensor([[True, False, False], [False, False, False]])
    assert masking.masked_mean(x, mask, dim=-1)[1].item() == 0.0
    assert masking.masked_mean(x, torch.zeros_like(mask)).item() == 0.0


@pytest.mark.parametrize("kind", POISONS)
def test_masked_reductions_ignore_poisoned_padding_in_value_and_gradient(kind):
    bt = make_batch(0, torch.float64)
    mask = bt["mask"]
    clean = bt["logp"].clone().requires_grad_(True)
    bad = poison(bt["logp"], mask, kind).requires_grad_(True)
    for fn in (masking.masked_sum, masking.masked_mean):
        for dim in (None, -1):
            v_clean, v_bad = fn(clean, mask, dim), fn(bad, mask, dim)
            assert torch.equal(v_clean, v_bad)
            (g_clean,) = torch.autograd.grad(v_clean.sum(), clean)
            (g_bad,) = torch.autograd.grad(v_bad.sum(), bad)
            assert torch.equal(g_clean, g_bad)
            assert torch.all(g_bad[~mask] == 0)


def test_zero_padding_zeroes_padding_keeps_tokens_and_blocks_nan_gradients():
    bt = make_batch(1, torch.float64)
    mask = bt["mask"]
    x = poison(bt["logp"], mask, "nan").requires_grad_(True)
    y = masking.zero_padding(x, mask)
    assert torch.all(y[~mask] == 0) and torch.equal(y[mask], x[mask])
    (g,) = torch.autograd.grad(torch.exp(y).sum(), x)
    assert torch.all(g[~mask] == 0) and not torch.isnan(g).any()


def test_check_adv_broadcasts_sequence_advantages_and_zeroes_padding():
    bt = make_batch(2, torch.float64)
    mask = bt["mask"]
    adv_tok = masking.check_adv(bt["adv"], mask)
    B, T = mask.shape
    for b in range(B):
        for t in range(T):
            assert adv_tok[b, t].item() == (bt["adv"][b].item() if mask[b, t] else 0.0)
    poisoned = poison(bt["adv_tok"], mask, "nan")
    out = masking.check_adv(poisoned, mask)
    assert torch.equal(out, torch.where(mask, bt["adv_tok"], torch.zeros_like(out)))


# ---------------------------------------------------------------- bad input

def test_check_mask_rejects_wrong_shape_and_names_mask():
    logp = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"mask.*\(2, 3\).*\(2, 4\)"):
        masking.check_mask(torch.ones(2, 4, dtype=torch.bool), logp)


def test_check_mask_rejects_non_bool_mask_and_says_how_to_convert():
    with pytest.raises(ValueError, match=r"mask must be a bool.*mask\.bool\(\)"):
        masking.check_mask(torch.ones(2, 3), torch.zeros(2, 3))


def test_check_tensor_rejects_non_tensor_wrong_ndim_and_integer_dtype():
    with pytest.raises(ValueError, match="logp must be a torch.Tensor, got a list"):
        masking.check_tensor([[0.0]], "logp")
    with pytest.raises(ValueError, match=r"logp must have shape \[B, T\]"):
        masking.check_tensor(torch.zeros(3), "logp", ndim=2)
    with pytest.raises(ValueError, match="logp must be a floating-point"):
        masking.check_tensor(torch.zeros(2, 3, dtype=torch.long), "logp", floating=True)


def test_check_token_inputs_names_the_tensor_whose_shape_differs():
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"old_logp must have the shape of logp \(2, 3\)"):
        masking.check_token_inputs(mask, logp=torch.zeros(2, 3), old_logp=torch.zeros(2, 4))


def test_check_adv_rejects_wrong_shape_and_names_adv():
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"adv must have shape \[B\]=\(2,\)"):
        masking.check_adv(torch.zeros(3), mask)
    with pytest.raises(ValueError, match="adv must be a floating-point"):
        masking.check_adv(torch.zeros(2, dtype=torch.long), mask)


@pytest.mark.parametrize("bad", [-0.1, float("nan"), "0.2", True, None])
def test_check_eps_rejects_negative_nan_and_non_numbers(bad):
    with pytest.raises(ValueError, match="eps_low"):
        masking.check_eps(bad, "eps_low")


def test_check_eps_upper_bound_and_allow_none():
    masking.check_eps(None, "eps_low", allow_none=True)
    masking.check_eps(0.99, "eps_low", upper=1.0)
    with pytest.raises(ValueError, match="eps_low must be < 1.0"):
        masking.check_eps(1.0, "eps_low", upper=1.0)
