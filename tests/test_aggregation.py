"""course_lib.aggregation: the four loss-aggregation modes and their per-token weights."""
import pytest
import torch

import reference as ref
from batches import DTYPES, POISONS, SEEDS, make_batch, poison, tol
from course_lib import aggregation
from course_lib.aggregation import aggregate, token_weights

MODES = ref.AGG_MODES


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize("max_len", [None, 11])
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_aggregate_value_and_gradient_match_loop_reference(seed, dtype, holes, max_len):
    bt = make_batch(seed, dtype, holes=holes)
    mask = bt["mask"]
    for mode in MODES:
        x = bt["logp"].clone().requires_grad_(True)
        value = aggregate(x, mask, mode, max_len)
        assert value.dtype == dtype
        torch.testing.assert_close(value.double(),
                                   _t(ref.aggregate(x.tolist(), mask.tolist(), mode, max_len)),
                                   **tol(dtype))
        (grad,) = torch.autograd.grad(value, x)
        expected = ref.token_weights(mask.tolist(), mode, max_len)
        torch.testing.assert_close(grad.double(), _t(expected), **tol(dtype))
        torch.testing.assert_close(token_weights(mask, mode, max_len), _t(expected), rtol=1e-12, atol=0)


def test_fully_masked_rows_are_not_counted_in_b():
    x = torch.randn(3, 4, dtype=torch.float64)
    mask = torch.tensor([[True, True, False, False], [False] * 4, [True] * 4])
    keep = torch.tensor([0, 2])
    for mode in MODES:
        # dropping the empty row changes nothing (T is kept, so sum-norm divides by the same 4)
        assert aggregate(x, mask, mode).item() == pytest.approx(aggregate(x[keep], mask[keep], mode).item())
    alpha = token_weights(mask, "seq-mean-token-sum")
    assert alpha[0, 0].item() == 0.5 and torch.all(alpha[1] == 0)


def test_all_masked_batch_gives_zero_loss_and_zero_gradient():
    x = torch.randn(2, 3, requires_grad=True)
    mask = torch.zeros(2, 3, dtype=torch.bool)
    for mode in MODES:
        value = aggregate(x, mask, mode)
        (grad,) = torch.autograd.grad(value, x)
        assert value.item() == 0.0 and torch.all(grad == 0)


def test_one_token_responses_make_token_mean_and_seq_mean_token_mean_agree():
    x = torch.randn(4, 5, dtype=torch.float64)
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[:, 0] = True
    assert aggregate(x, mask, "token-mean").item() == pytest.approx(
        aggregate(x, mask, "seq-mean-token-mean").item(), abs=1e-14)
    assert aggregate(x, mask, "seq-mean-token-sum").item() == pytest.approx(x[:, 0].mean().item())


def test_token_mean_equals_seq_mean_token_mean_when_all_lengths_are_equal():
    x = torch.randn(5, 6, dtype=torch.float64)
    mask = torch.zeros(5, 6, dtype=torch.bool)
    mask[:, :4] = True
    torch.testing.assert_close(token_weights(mask, "token-mean"), token_weights(mask, "seq-mean-token-mean"))
    assert aggregate(x, mask, "token-mean").item() == pytest.approx(
        aggregate(x, mask, "seq-mean-token-mean").item(), abs=1e-14)
    mask[0, 4] = True                                    # one row longer: the modes now differ
    assert not torch.allclose(token_weights(mask, "token-mean"), token_weights(mask, "seq-mean-token-mean"))


def test_seq_mean_token_sum_norm_divides_by_max_len_or_padded_length():
    x = torch.randn(3, 5, dtype=torch.float64)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[0, 3:] = False
    base = aggregate(x, mask, "seq-mean-token-sum").item()
    assert aggregate(x, mask, "seq-mean-token-sum-norm").item() == pytest.approx(base / 5)
    assert aggregate(x, mask, "seq-mean-token-sum-norm", max_len=40).item() == pytest.approx(base / 40)


@pytest.mark.parametrize("max_len", [None, 9])
def test_each_mode_function_called_directly_matches_the_loop_reference_of_its_name(max_len):
    """The per-mode functions (and the table that names them) against the references, not each other."""
    assert sorted(aggregation.AGGREGATIONS) == sorted(MODES)
    direct = {"token-mean": aggregation.token_mean,
              "seq-mean-token-mean": aggregation.seq_mean_token_mean,
              "seq-mean-token-sum": aggregation.seq_mean_token_sum,
              "seq-mean-token-sum-norm": aggregation.seq_mean_token_sum_norm}
    bt = make_batch(6, torch.float64, holes=True)
    x, mask = bt["logp"], bt["mask"]
    for mode in MODES:
        expected = ref.aggregate(x.tolist(), mask.tolist(), mode, max_len)
        assert direct[mode](x, mask, max_len).item() == pytest.approx(expected, rel=1e-12), mode
        assert aggregation.AGGREGATIONS[mode](x, mask, max_len).item() == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------- the rlhf-book example (§2.1)

def _book_setup():
    mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [1] * 7], dtype=torch.bool)
    ratio = torch.ones(2, 7, requires_grad=True)
    advs = torch.full((2, 7), 2.0)
    return mask, ratio, advs


def _grad_strings(value, ratio):
    (g,) = torch.autograd.grad(value, ratio)
    return f"{g[0, 0]:.4f}", f"{g[1, 0]:.4f}"


def test_rlhf_book_per_sequence_and_fixed_length_gradients():
    mask, ratio, advs = _book_setup()
    assert _grad_strings(aggregate(ratio * advs, mask, "seq-mean-token-mean"), ratio) == ("0.2500", "0.1429")
    assert _grad_strings(aggregate(ratio * advs, mask, "seq-mean-token-sum-norm", max_len=7),
                         ratio) == ("0.1429", "0.1429")


def test_rlhf_book_token_mean_is_0_1818_with_the_advantage_and_0_0909_without():
    mask, ratio, advs = _book_setup()
    # the comparable token-mean number (fact sheet §2.1): 2 / 11
    assert _grad_strings(aggregate(ratio * advs, mask, "token-mean"), ratio) == ("0.1818", "0.1818")
    # the book's printed 0.0909 averages the ratio alone, without the advantage
    assert _grad_strings(aggregate(ratio, mask, "token-mean"), ratio) == ("0.0909", "0.0909")


def test_rlhf_book_token_weights_times_advantage():
    mask, _, _ = _book_setup()
    w = {m: 2 * token_weights(mask, m, max_len=7) for m in MODES}
    first_tokens = {m: [f"{v:.4f}" for v in w[m][:, 0].tolist()] for m in MODES}   # short, long row
    assert first_tokens["seq-mean-token-mean"] == ["0.2500", "0.1429"]
    assert first_tokens["seq-mean-token-sum-norm"] == ["0.1429", "0.1429"]
    assert f"{w['token-mean'][0, 0]:.4f}" == "0.1818"
    assert torch.all(w["token-mean"][~mask] == 0)


def test_rlhf_book_scalar_example():
    loss_tok = torch.tensor([[1, 1, 1, 1, 10, 0, 0, 0, 0, 0], [1] * 9 + [10]], dtype=torch.float64)
    mask = torch.tensor([[True] * 5 + [False] * 5, [True] * 10])
    assert f"{aggregate(loss_tok, mask, 'seq-mean-token-mean'):.2f}" == "2.35"
    assert f"{aggregate(loss_tok, mask, 'token-mean'):.2f}" == "2.20"
    contributions = [aggregate(loss_tok[i:i + 1], mask[i:i + 1], "seq-mean-token-sum-norm", max_len=10)
                     for i in range(2)]
    assert [f"{c:.2f}" for c in contributions] == ["1.40", "1.90"]


# ---------------------------------------------------------------- padding

@pytest.mark.parametrize("kind", POISONS)
def test_poisoned_padding_changes_neither_value_nor_gradient(kind):
    bt = make_batch(5, torch.float32, holes=True)
    mask = bt["mask"]
    for mode in MODES:
        clean = torch.where(mask, bt["logp"], torch.zeros_like(bt["logp"])).requires_grad_(True)
        bad = poison(bt["logp"], mask, kind).requires_grad_(True)
        v_clean, v_bad = aggregate(clean, mask, mode), aggregate(bad, mask, mode)
        assert torch.equal(v_clean, v_bad)
        (g_clean,) = torch.autograd.grad(v_clean, clean)
        (g_bad,) = torch.autograd.grad(v_bad, bad)
        assert torch.equal(g_clean, g_bad) and torch.all(g_bad[~mask] == 0)


# ---------------------------------------------------------------- bad input

def test_unknown_mode_lists_the_modes():
    x, mask = torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"mode must be one of .*token-mean.*got 'mean'"):
        aggregate(x, mask, "mean")
    with pytest.raises(ValueError, match="mode must be one of"):
        token_weights(mask, "seq-mean")


@pytest.mark.parametrize("max_len", [0, -3, 2.5, True])
def test_bad_max_len_raises(max_len):
    with pytest.raises(ValueError, match="max_len must be a positive int or None"):
        aggregate(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), "seq-mean-token-sum-norm", max_len)


def test_bad_tensors_raise_and_name_the_argument():
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"mask must have the shape of loss_tok \(2, 3\)"):
        aggregate(torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be a bool"):
        aggregate(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask must be a bool"):
        token_weights(torch.ones(2, 3))
    with pytest.raises(ValueError, match="loss_tok must be a torch.Tensor"):
        aggregate([[0.0, 0.0, 0.0]] * 2, mask)
    with pytest.raises(ValueError, match="loss_tok must be a floating-point"):
        aggregate(torch.zeros(2, 3, dtype=torch.long), mask)
    with pytest.raises(ValueError, match=r"loss_tok must have shape \[B, T\]"):
        aggregate(torch.zeros(3), mask)
