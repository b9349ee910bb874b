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


# ---------------------------------------------------------------- the shared argument checks

@pytest.mark.parametrize("bad", [True, False, float("nan"), "1", None, torch.tensor(1.0)])
def test_check_number_rejects_bools_nan_strings_none_and_tensors(bad):
    with pytest.raises(ValueError, match=r"beta must be a number"):
        masking.check_number(bad, "beta")


def test_check_number_bounds_and_messages():
    masking.check_number(0.5, "gamma", ge=0, le=1)
    masking.check_number(float("inf"), "cap", gt=0)               # an infinite cap is a real bound
    masking.check_number(None, "dual_clip", gt=1, allow_none=True)
    with pytest.raises(ValueError, match=r"^gamma must be a number in \[0, 1\], got 1.5$"):
        masking.check_number(1.5, "gamma", ge=0, le=1)
    with pytest.raises(ValueError, match=r"^cap must be a number > 0, got 0$"):
        masking.check_number(0, "cap", gt=0)
    with pytest.raises(ValueError, match=r"^eps must be a number >= 0, got -1$"):
        masking.check_number(-1, "eps", ge=0)
    with pytest.raises(ValueError, match=r"^dual_clip must be None or a number > 1, got 1$"):
        masking.check_number(1, "dual_clip", gt=1, allow_none=True)
    with pytest.raises(ValueError, match=r"^current_kl must be a number \(not NaN\), got nan$"):
        masking.check_number(float("nan"), "current_kl")


@pytest.mark.parametrize("bad", [True, 0, -2, 2.0, "3", None])
def test_check_int_rejects_bools_floats_and_small_values(bad):
    with pytest.raises(ValueError, match=r"^horizon must be a positive int, got "):
        masking.check_int(bad, "horizon")


def test_check_int_at_least_and_allow_none():
    masking.check_int(2, "group_size", at_least=2)
    masking.check_int(None, "max_len", allow_none=True)
    with pytest.raises(ValueError, match=r"^group_size must be an int >= 2, got 1$"):
        masking.check_int(1, "group_size", at_least=2)
    with pytest.raises(ValueError, match=r"^max_len must be a positive int or None, got True$"):
        masking.check_int(True, "max_len", allow_none=True)


def test_check_choice_lists_the_choices_as_given():
    masking.check_choice("k3", "kind", ["k1", "k2", "k3"])
    with pytest.raises(ValueError, match=r"^level must be one of \('token', 'sequence'\), got 'seq'$"):
        masking.check_choice("seq", "level", ("token", "sequence"))


def test_true_is_never_a_number_or_an_int_anywhere_in_the_library():
    """The checks agree: every public function that takes a number or an int refuses True."""
    from course_lib import advantages, aggregation, corrections, kl, losses, rewards
    bt = make_batch(0)
    args = (bt["logp"], bt["old_logp"], bt["adv"], bt["mask"])
    r, m = torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)
    calls = {
        "group_size": lambda: advantages.group_advantages(torch.zeros(4), True),
        "group_size ": lambda: advantages.signal_groups(torch.zeros(4), True),
        "group_size  ": lambda: advantages.signal_probability(0.5, True),
        "eps": lambda: advantages.group_advantages(torch.zeros(4), 2, eps=True),
        "gamma": lambda: advantages.gae(r, r, m, gamma=True),
        "lam": lambda: advantages.gae(r, r, m, lam=True),
        "max_len": lambda: aggregation.aggregate(r, m, "seq-mean-token-sum-norm", True),
        "beta": lambda: kl.adaptive_kl_update(True, 0.1, 0.1, 1, 1),
        "target_kl": lambda: kl.adaptive_kl_update(0.1, 0.1, True, 1, 1),
        "current_kl": lambda: kl.adaptive_kl_update(0.1, True, 0.1, 1, 1),
        "n_steps": lambda: kl.adaptive_kl_update(0.1, 0.1, 0.1, True, 1),
        "horizon": lambda: kl.adaptive_kl_update(0.1, 0.1, 0.1, 1, True),
        "cap": lambda: corrections.tis_weights(bt["old_logp"], bt["rollout_logp"], bt["mask"], cap=True),
        "cache_len": lambda: rewards.overlong_penalty(torch.tensor([3]), 10, True),
        "eps_low": lambda: losses.ppo_loss(*args, eps_low=True),
        "eps_high": lambda: losses.cispo_loss(*args, eps_high=True),
        "dual_clip": lambda: losses.ppo_loss(*args, dual_clip=True),
        "tau_pos": lambda: losses.sapo_loss(*args, tau_pos=True),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"^{name.strip()} must be "):
            call()


# ---------------------------------------------------------------- the clamped log-ratio

@pytest.mark.parametrize("dtype", DTYPES)
def test_clamped_log_ratio_matches_the_loop_reference_per_token_and_per_sequence(dtype):
    bt = make_batch(3, dtype, holes=True, spread=15.0)              # some |log r| beyond 20
    logp, old, mask = bt["logp"], bt["old_logp"], bt["mask"]
    got = masking.clamped_log_ratio(poison(logp, mask, "nan"), old, mask)
    expected = ref.log_ratio(logp.tolist(), old.tolist(), mask.tolist())
    torch.testing.assert_close(got.double(), torch.tensor(expected, dtype=torch.float64), **tol(dtype))
    assert (got.abs() == 20).any()
    seq = masking.clamped_log_ratio(logp, old, mask, per_sequence=True)
    sums = ref.masked_row_sums((logp - old).tolist(), mask.tolist())
    clamped = [min(max(s, -20.0), 20.0) for s in sums]
    expected_seq = torch.tensor(clamped, dtype=torch.float64)[:, None].expand(mask.shape)
    torch.testing.assert_close(seq.double(), expected_seq, **tol(dtype))
    # without a mask: every position, no zeroing
    torch.testing.assert_close(masking.clamped_log_ratio(logp, old), (logp - old).clamp(-20, 20))
