"""course_lib.kl: k1/k2/k3, their gradients as losses, the exact KL, the adaptive controller."""
import math

import pytest
import torch

import reference as ref
from batches import DTYPES, POISONS, SEEDS, make_batch, poison, tol
from course_lib import kl
from course_lib.aggregation import aggregate

KINDS = ("k1", "k2", "k3")


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_estimators_values_and_gradients_match_reference(seed, dtype):
    bt = make_batch(seed, dtype)
    mask = bt["mask"]
    lp, rlp, ms = bt["logp"].tolist(), bt["ref_logp"].tolist(), mask.tolist()
    for kind in KINDS:
        for m in (mask, None):
            logp = bt["logp"].clone().requires_grad_(True)
            k = kl.kl_estimate(logp, bt["ref_logp"], m, kind=kind)
            assert k.shape == logp.shape and k.dtype == dtype
            torch.testing.assert_close(k.double(), _t(ref.kl_tokens(kind, lp, rlp, m if m is None else ms)),
                                       **tol(dtype))
            direct = {"k1": kl.kl_k1, "k2": kl.kl_k2, "k3": kl.kl_k3}[kind](logp, bt["ref_logp"], m)
            torch.testing.assert_close(direct.double(), _t(ref.kl_tokens(kind, lp, rlp, m if m is None else ms)),
                                       **tol(dtype))
            (grad,) = torch.autograd.grad(k.sum(), logp)
            expected = [[ref.kl_token_grad(kind, lp[b][t], rlp[b][t]) if m is None or ms[b][t] else 0.0
                         for t in range(len(lp[0]))] for b in range(len(lp))]
            torch.testing.assert_close(grad.double(), _t(expected), **tol(dtype))


def test_k2_and_k3_are_non_negative_and_k1_is_negative_where_ref_is_likelier():
    logp = torch.tensor([[-1.0, -2.0, -0.5]])
    ref_logp = torch.tensor([[-0.5, -2.5, -0.5]])
    assert (kl.kl_k1(logp, ref_logp) < 0).tolist() == [[True, False, False]]
    assert torch.all(kl.kl_k2(logp, ref_logp) >= 0) and torch.all(kl.kl_k3(logp, ref_logp) >= 0)
    assert kl.kl_k3(logp, ref_logp)[0, 2].item() == 0.0


def test_k3_keeps_its_digits_for_tiny_log_ratios():
    # (r - 1) - log r ~ log_r^2 / 2 for tiny log_r; the naive float32 form rounds to 0 or below
    log_r = 1e-4
    logp = torch.tensor([[0.0]])
    ref_logp = torch.tensor([[log_r]])
    exact = math.expm1(log_r) - log_r                     # float64, ~5.0e-9
    assert kl.kl_k3(logp, ref_logp).item() == pytest.approx(exact, rel=1e-3)


def test_log_ratio_is_clamped_at_20_before_exp():
    logp = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    ref_logp = torch.tensor([[100.0, -100.0]], dtype=torch.float64)
    k3 = kl.kl_k3(logp, ref_logp)
    assert torch.isfinite(k3).all()
    assert k3[0].tolist() == pytest.approx([ref.kl_token("k3", 0.0, 100.0), ref.kl_token("k3", 0.0, -100.0)])
    assert k3[0, 1].item() == pytest.approx(19.0, abs=1e-8)          # e^-20 - 1 + 20


@pytest.mark.parametrize("kind", POISONS)
def test_poisoned_padding_changes_neither_value_nor_gradient(kind):
    bt = make_batch(3, torch.float32, holes=True)
    mask = bt["mask"]
    for est in KINDS:
        for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
            values, grads = [], []
            poisoned = (poison(bt["logp"], mask, kind), poison(bt["ref_logp"], mask, kind, seed=7))
            for logp, ref_logp in ((bt["logp"], bt["ref_logp"]), poisoned):
                logp = logp.clone().requires_grad_(True)
                k = kl.kl_estimate(logp, ref_logp, mask, kind=est)
                assert torch.all(k[~mask] == 0)
                value = aggregate(k, mask, mode)
                (g,) = torch.autograd.grad(value, logp)
                values.append(value)
                grads.append(g)
            assert torch.equal(values[0], values[1])
            assert torch.equal(grads[0], grads[1]) and torch.all(grads[1][~mask] == 0)


# ---------------------------------------------------------------- each estimator's gradient as a loss

def _softmax_pair(V=50, seed=0):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(V, generator=gen, dtype=torch.float64).requires_grad_(True)
    ref_logp = torch.log_softmax(torch.randn(V, generator=gen, dtype=torch.float64), -1)
    return logits, ref_logp


def _expected_grad(kind, logits, ref_logp):
    """sum_x pi(x) grad k(x): the expected gradient of the estimator used as a loss, x ~ pi."""
    logp = torch.log_softmax(logits, -1)
    k = kl.kl_estimate(logp, ref_logp, kind=kind)          # [V], one value per token x
    (g,) = torch.autograd.grad((logp.exp().detach() * k).sum(), logits)
    return g


def _kl_grads(logits, ref_logp):
    """Closed-form gradients in the logits of the two KLs, pi = softmax(logits):
    d KL(pi_ref || pi) = pi - pi_ref;  d KL(pi || pi_ref) = pi (log pi - log pi_ref - KL(pi || pi_ref))."""
    logp = torch.log_softmax(logits.detach(), -1)
    pi, reverse_kl = logp.exp(), (logp.exp() * (logp - ref_logp)).sum()
    return pi - ref_logp.exp(), pi * (logp - ref_logp - reverse_kl)


@pytest.mark.parametrize("seed", [0, 1])
def test_k3_as_a_loss_has_the_forward_kl_gradient_in_expectation(seed):
    logits, ref_logp = _softmax_pair(seed=seed)
    g_k3 = _expected_grad("k3", logits, ref_logp)
    g_forward, g_reverse = _kl_grads(logits, ref_logp)
    torch.testing.assert_close(g_k3, g_forward, rtol=1e-9, atol=1e-12)
    # and it is not the reverse-KL gradient that k3's *value* estimates
    assert (g_k3 - g_reverse).norm() > 0.05 * g_reverse.norm()


@pytest.mark.parametrize("seed", [0, 1])
def test_k2_as_a_loss_has_the_reverse_kl_gradient_and_k1_has_zero(seed):
    logits, ref_logp = _softmax_pair(seed=seed)
    _, g_reverse = _kl_grads(logits, ref_logp)
    torch.testing.assert_close(_expected_grad("k2", logits, ref_logp), g_reverse, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(_expected_grad("k1", logits, ref_logp), torch.zeros_like(logits),
                               rtol=0, atol=1e-14)
    assert g_reverse.norm() > 1e-2                         # so the comparison above is not 0 == 0


# ---------------------------------------------------------------- exact KL and seed 000's table

@pytest.mark.parametrize("dtype", DTYPES)
def test_categorical_kl_matches_loop_and_is_zero_on_itself(dtype):
    gen = torch.Generator().manual_seed(0)
    logp_p = torch.log_softmax(torch.randn(3, 20, generator=gen, dtype=torch.float64), -1).to(dtype)
    logp_q = torch.log_softmax(torch.randn(3, 20, generator=gen, dtype=torch.float64), -1).to(dtype)
    got = kl.categorical_kl(logp_p, logp_q)
    assert got.shape == (3,)
    expected = [ref.categorical_kl(p, q) for p, q in zip(logp_p.tolist(), logp_q.tolist())]
    torch.testing.assert_close(got.double(), _t(expected), **tol(dtype))
    assert torch.all(got > 0)
    torch.testing.assert_close(kl.categorical_kl(logp_p, logp_p), torch.zeros(3, dtype=dtype))


def test_seed_000_kl_table_reproduced_within_its_standard_errors():
    """Seed 000's KL experiment, same code order, values computed with course_lib.kl. Its float32 draws
    differ in their last bits between CPUs' kernels, so a few of the 100 000 tokens change: the exact
    KL keeps its 4 digits, each printed figure holds within 3 standard errors (plus half a last digit)."""
    torch.manual_seed(0)
    V = 1000
    p_ref = torch.randn(V).softmax(-1)
    q = (p_ref.log() + 0.3 * torch.randn(V)).softmax(-1)
    exact = kl.categorical_kl(q.log(), p_ref.log())                 # KL(q || p_ref)
    x = torch.multinomial(q, 100_000, replacement=True)
    logp, ref_logp = q.log()[x][None, :], p_ref.log()[x][None, :]  # [1, N]
    assert f"{exact:.4f}" == "0.0502"
    n = x.numel()
    for kind, (mean, std, negative) in zip(KINDS, [(0.0497, 0.3221, 0.44), (0.0531, 0.0744, 0.0),
                                                   (0.0505, 0.0697, 0.0)]):
        v = kl.kl_estimate(logp, ref_logp, kind=kind)[0].double()
        dev2 = (v - v.mean()) ** 2
        mean_se, std_se = v.std() / n ** 0.5, dev2.std() / n ** 0.5 / (2 * v.std())
        neg = (v < 0).double().mean()
        assert abs(v.mean() - mean) <= 3 * mean_se + 5e-5, kind
        assert abs(v.std() - std) <= 3 * std_se + 5e-5, kind
        assert abs(neg - negative) <= 3 * (neg * (1 - neg) / n) ** 0.5 + 0.005, kind


# ---------------------------------------------------------------- adaptive KL controller

def test_adaptive_kl_update_matches_reference_and_clips_the_error():
    for beta, cur, target, n, h in [(0.2, 0.1, 0.1, 64, 10000), (0.2, 0.5, 0.1, 64, 10000),
                                    (0.2, 0.0, 0.1, 64, 10000), (0.05, 0.105, 0.1, 512, 1000),
                                    (1.0, 0.09, 0.1, 10, 10)]:
        got = kl.adaptive_kl_update(beta, cur, target, n, h)
        assert isinstance(got, float)
        assert got == pytest.approx(ref.adaptive_kl_update(beta, cur, target, n, h), rel=1e-15)
    # far above target: the error saturates at +0.2; far below: at -0.2
    assert kl.adaptive_kl_update(1.0, 100.0, 0.1, 10, 10) == pytest.approx(1.2)
    assert kl.adaptive_kl_update(1.0, 0.0, 0.1, 10, 10) == pytest.approx(0.8)


def test_adaptive_kl_raises_beta_above_target_and_lowers_it_below():
    beta = 0.1
    for _ in range(5):
        beta = kl.adaptive_kl_update(beta, 0.2, 0.1, 64, 1000)
    assert beta > 0.1
    beta2 = 0.1
    for _ in range(5):
        beta2 = kl.adaptive_kl_update(beta2, 0.05, 0.1, 64, 1000)
    assert beta2 < 0.1


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, word", [({"current_kl": float("nan")}, "current_kl"),
                                          ({"beta": 0.0}, "beta"), ({"target_kl": -1.0}, "target_kl"),
                                          ({"n_steps": 0}, "n_steps"), ({"horizon": 2.5}, "horizon")])
def test_adaptive_kl_rejects_bad_input_naming_the_argument(kwargs, word):
    args = dict(beta=0.1, current_kl=0.1, target_kl=0.1, n_steps=64, horizon=10000) | kwargs
    with pytest.raises(ValueError, match=word):
        kl.adaptive_kl_update(**args)


def test_unknown_kl_kind_lists_the_kinds():
    with pytest.raises(ValueError, match=r"kind must be one of \['k1', 'k2', 'k3'\], got 'k4'"):
        kl.kl_estimate(torch.zeros(2, 3), torch.zeros(2, 3), kind="k4")


def test_kl_bad_tensors_raise_and_name_the_argument():
    logp, mask = torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="ref_logp must have the shape of logp"):
        kl.kl_k3(logp, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="ref_logp must have the shape of logp"):
        kl.kl_k3(logp, torch.zeros(2, 4), mask)
    with pytest.raises(ValueError, match="mask"):
        kl.kl_k1(logp, logp, torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be a bool"):
        kl.kl_k2(logp, logp, torch.ones(2, 3))
    with pytest.raises(ValueError, match="logp must be a torch.Tensor"):
        kl.kl_k1([[0.0]], logp)
    with pytest.raises(ValueError, match="ref_logp"):
        kl.kl_k1(logp, [[0.0]], mask)
    with pytest.raises(ValueError, match="logp_q must have the shape of logp_p"):
        kl.categorical_kl(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="logp_p"):
        kl.categorical_kl([0.0, 0.0], torch.zeros(2))
    with pytest.raises(ValueError, match="logp_q"):
        kl.categorical_kl(torch.zeros(2), [0.0, 0.0])


def test_adaptive_kl_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="beta must be a number > 0"):
        kl.adaptive_kl_update(0.0, 0.1, 0.1, 1, 1)
    with pytest.raises(ValueError, match="target_kl must be a number > 0"):
        kl.adaptive_kl_update(0.1, 0.1, -1.0, 1, 1)
    with pytest.raises(ValueError, match="current_kl must be a number"):
        kl.adaptive_kl_update(0.1, "0.1", 0.1, 1, 1)
    with pytest.raises(ValueError, match="n_steps must be a positive int"):
        kl.adaptive_kl_update(0.1, 0.1, 0.1, 0, 1)
    with pytest.raises(ValueError, match="horizon must be a positive int"):
        kl.adaptive_kl_update(0.1, 0.1, 0.1, 1, 2.5)
