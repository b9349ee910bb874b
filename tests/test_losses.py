"""course_lib.losses: every registered policy loss, its gradient, c(r, A), and the registry."""
import inspect
import math

import pytest
import torch

import reference as ref
from batches import DTYPES, POISONS, SEEDS, make_batch, poison, tol
from course_lib import losses as L
from course_lib.aggregation import aggregate
from course_lib.corrections import tis_weights
from course_lib.kl import kl_estimate

NAMES = ("cispo", "dapo", "dr_grpo", "grpo", "gspo", "ppo", "sapo")
MODES = ref.AGG_MODES
# knob settings tried on random batches, besides each loss's defaults
EXTRA_KNOBS = {
    "ppo": [dict(dual_clip=3.0), dict(eps_low=0.1, eps_high=0.5)],
    "grpo": [dict(dual_clip=1.5)],
    "dapo": [dict(eps_low=0.3, eps_high=0.1)],
    "dr_grpo": [dict(eps_low=0.05, eps_high=0.05)],
    "gspo": [dict(eps_low=0.05, eps_high=0.08)],       # wide enough that some sequences are unclipped
    "cispo": [dict(eps_low=0.2, eps_high=0.2), dict(eps_low=None, eps_high=0.05)],
    "sapo": [dict(tau_pos=2.0, tau_neg=0.5)],
}


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


def _alpha(mask, mode):
    """Aggregation weights [B, T] from the reference's table (fact sheet §2), not from the library."""
    return _t(ref.token_weights(mask.tolist(), mode))


def _run(name, bt, adv, *, agg, max_len=None, is_weight=None, **knobs):
    """Library loss value and d loss / d logp for one batch."""
    logp = bt["logp"].clone().requires_grad_(True)
    value, stats = L.LOSSES[name](logp, bt["old_logp"], adv, bt["mask"], agg=agg, max_len=max_len,
                                  is_weight=is_weight, **knobs)
    (grad,) = torch.autograd.grad(value, logp)
    return value, grad, stats


def _reference(name, bt, adv, *, agg, max_len=None, is_weight=None, **knobs):
    return ref.policy_loss(name, bt["logp"].tolist(), bt["old_logp"].tolist(), adv.tolist(),
                           bt["mask"].tolist(), agg=agg, max_len=max_len,
                           is_weight=None if is_weight is None else is_weight.tolist(), **knobs)


# ---------------------------------------------------------------- registry and defaults

def test_registry_holds_the_seven_losses():
    assert L.available_losses() == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_loss_defaults_are_the_fact_sheet_defaults(name):
    params = inspect.signature(L.LOSSES[name]).parameters
    for knob, value in ref.DEFAULTS[name].items():
        assert params[knob].default == value, (name, knob)


def test_registering_a_duplicate_name_raises():
    with pytest.raises(KeyError, match="'ppo' is already registered"):
        L.register_loss("ppo")(lambda *a, **k: None)
    assert L.LOSSES["ppo"] is L.ppo_loss


def test_resolve_loss_accepts_a_callable_and_a_name():
    def my_loss(logp, old_logp, adv, mask, **kwargs):
        return L.ppo_loss(logp, old_logp, adv, mask, **kwargs)
    assert L.resolve_loss(my_loss) is my_loss
    assert L.resolve_loss("cispo") is L.cispo_loss
    c = L.grad_coefficient(my_loss, [0.5, 1.0, 1.5], 1.0)
    torch.testing.assert_close(c, L.grad_coefficient("ppo", [0.5, 1.0, 1.5], 1.0))


def test_unknown_loss_name_error_lists_the_available_names():
    with pytest.raises(ValueError, match=r"unknown loss 'grpo2'; available: \['cispo', 'dapo', .*'sapo'\]"):
        L.resolve_loss("grpo2")


def test_registered_context_manager_adds_then_restores_the_registry():
    before = dict(L.LOSSES)

    def mine(*args, **kwargs):
        return L.ppo_loss(*args, **kwargs)
    with L.registered("mine", mine) as fn:
        assert fn is mine and L.resolve_loss("mine") is mine and "mine" in L.available_losses()
    assert L.LOSSES == before
    with pytest.raises(RuntimeError):
        with L.registered("mine", mine):
            raise RuntimeError("boom")
    assert L.LOSSES == before
    with pytest.raises(KeyError):                 # a clash leaves the original in place
        with L.registered("ppo", mine):
            pass
    assert L.LOSSES == before


# ---------------------------------------------------------------- values and gradients against the loops

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_loss_value_and_gradient_match_reference(name, dtype):
    for seed in SEEDS:
        bt = make_batch(seed, dtype, holes=(seed == 2))
        advs = [bt["adv"]] if name == "gspo" else [bt["adv"], bt["adv_tok"]]
        for knobs in [{}] + EXTRA_KNOBS[name]:
            for mode in MODES:
                for adv in advs:
                    for is_weight, max_len in ((None, None), (bt["is_weight"], 12)):
                        kw = dict(agg=mode, max_len=max_len, is_weight=is_weight, **knobs)
                        value, grad, _ = _run(name, bt, adv, **kw)
                        ref_value, ref_grad = _reference(name, bt, adv, **kw)
                        assert value.dtype == dtype and value.shape == ()
                        torch.testing.assert_close(value.double(), _t(ref_value), **tol(dtype))
                        torch.testing.assert_close(grad.double(), _t(ref_grad), **tol(dtype))


@pytest.mark.parametrize("name", NAMES)
def test_reference_closed_form_gradient_agrees_with_finite_differences_of_reference_value(name):
    """The references check each other: the closed-form gradient is the slope of the loop value.

    CISPO's weight is detached, so its gradient is the slope with the ratio held fixed: old_logp
    moves with logp, and only the log pi factor changes.
    """
    bt = make_batch(7, torch.float64, holes=True)
    adv = bt["adv"] if name == "gspo" else bt["adv_tok"]
    knobs = dict(eps_low=0.05, eps_high=0.05) if name == "gspo" else {}
    logp, old, mask = bt["logp"].tolist(), bt["old_logp"].tolist(), bt["mask"].tolist()
    h = 1e-6
    for mode in MODES:
        kw = dict(agg=mode, is_weight=bt["is_weight"].tolist(), **knobs)
        _, grad = ref.policy_loss(name, logp, old, adv.tolist(), mask, **kw)
        for b in range(len(mask)):
            for t in range(len(mask[0])):
                up = [row[:] for row in logp]
                down = [row[:] for row in logp]
                up[b][t] += h
                down[b][t] -= h
                old_up, old_down = old, old
                if name == "cispo":
                    old_up = [row[:] for row in old]
                    old_down = [row[:] for row in old]
                    old_up[b][t] += h
                    old_down[b][t] -= h
                slope = (ref.policy_loss(name, up, old_up, adv.tolist(), mask, **kw)[0]
                         - ref.policy_loss(name, down, old_down, adv.tolist(), mask, **kw)[0]) / (2 * h)
                assert grad[b][t] == pytest.approx(slope, rel=1e-5, abs=1e-8), (mode, b, t)


@pytest.mark.parametrize("name", NAMES)
def test_default_aggregation_is_the_papers(name):
    bt = make_batch(0)
    default_value, _ = L.LOSSES[name](bt["logp"], bt["old_logp"], bt["adv"], bt["mask"])
    explicit, _ = L.LOSSES[name](bt["logp"], bt["old_logp"], bt["adv"], bt["mask"],
                                 agg=ref.DEFAULTS[name]["agg"])
    assert torch.equal(default_value, explicit)
    assert default_value.item() == pytest.approx(_reference(name, bt, bt["adv"], agg=None)[0], rel=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_on_policy_every_loss_gradient_is_reinforce(name):
    """r = 1 everywhere: c = A, so d loss / d logp = -alpha A (GSPO: spread over the row)."""
    bt = make_batch(1)
    bt["old_logp"] = bt["logp"].clone()
    mask = bt["mask"]
    for mode in MODES:
        _, grad, _ = _run(name, bt, bt["adv"], agg=mode)
        alpha = _alpha(mask, mode)
        if name == "gspo":
            lengths = mask.sum(dim=1, keepdim=True).clamp_min(1)
            expected = -alpha.sum(dim=1, keepdim=True) * bt["adv"][:, None] / lengths * mask
        else:
            expected = -alpha * bt["adv"][:, None] * mask
        torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- specific gradient facts

def _clip_batch(dtype=torch.float64):
    """One row, six tokens: (r, A) = (1.5, +1) (1.1, +1) (0.5, -1) (0.9, -1) (0.5, +1) (1.5, -1)."""
    r = torch.tensor([[1.5, 1.1, 0.5, 0.9, 0.5, 1.5]], dtype=dtype)
    adv_tok = torch.tensor([[1.0, 1.0, -1.0, -1.0, 1.0, -1.0]], dtype=dtype)
    old_logp = torch.full_like(r, -1.0)
    mask = torch.ones_like(r, dtype=torch.bool)
    return dict(logp=old_logp + r.log(), old_logp=old_logp, mask=mask), r, adv_tok


def test_ppo_clipped_tokens_get_exactly_zero_gradient_while_cispo_tokens_do_not():
    bt, r, adv_tok = _clip_batch()
    _, g_ppo, stats = _run("ppo", bt, adv_tok, agg="token-mean")
    _, g_cispo, _ = _run("cispo", bt, adv_tok, agg="token-mean", eps_low=0.2, eps_high=0.2)
    # tokens 0 (A>0, r>1+eps_high) and 2 (A<0, r<1-eps_low): PPO's gradient is exactly zero
    assert g_ppo[0, 0].item() == 0.0 and g_ppo[0, 2].item() == 0.0
    assert torch.all(g_ppo[0, [1, 3, 4, 5]] != 0)
    # ... and CISPO keeps them, weighted by the clipped ratio: -alpha * clip(r) * A
    assert g_cispo[0, 0].item() == pytest.approx(-1.2 / 6) and g_cispo[0, 2].item() == pytest.approx(0.8 / 6)
    assert torch.all(g_cispo != 0)
    assert stats["clip/high_frac"] == pytest.approx(1 / 6) and stats["clip/low_frac"] == pytest.approx(1 / 6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("eps", [(None, 0.28), (0.2, 0.2)])
def test_cispo_gradient_is_minus_alpha_times_detached_clipped_ratio_times_advantage(eps, mode):
    bt = make_batch(4, holes=True, spread=0.5)
    mask = bt["mask"]
    _, grad, _ = _run("cispo", bt, bt["adv_tok"], agg=mode, eps_low=eps[0], eps_high=eps[1])
    ratio = torch.exp(bt["logp"] - bt["old_logp"])
    lo = 0.0 if eps[0] is None else 1 - eps[0]
    expected = -_alpha(mask, mode) * ratio.clamp(lo, 1 + eps[1]) * bt["adv_tok"] * mask
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-15)
    assert (ratio[mask] > 1 + eps[1]).any()                  # some tokens really are clipped


def test_gspo_token_gradient_is_s_times_a_over_length_times_the_sequence_weight_or_zero_when_clipped():
    # rows: constant token log-ratio d, so s = exp(d); eps 0.05 / 0.05
    d = torch.tensor([0.01, 0.1, -0.1, -0.1, 0.1, 0.0], dtype=torch.float64)
    adv = torch.tensor([1.0, 1.0, -1.0, 1.0, -1.0, 0.5], dtype=torch.float64)
    lengths = torch.tensor([3, 5, 2, 4, 1, 5])
    mask = torch.arange(5)[None, :] < lengths[:, None]
    old_logp = -torch.rand(6, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    bt = dict(logp=old_logp + d[:, None], old_logp=old_logp, mask=mask)
    s = torch.exp(d)
    clipped_wrong_side = torch.tensor([False, True, True, False, False, False])
    for mode in MODES:
        _, grad, stats = _run("gspo", bt, adv, agg=mode, eps_low=0.05, eps_high=0.05)
        seq_weight = _alpha(mask, mode).sum(dim=1)                           # [B]
        for i in range(6):
            if clipped_wrong_side[i]:
                assert torch.all(grad[i] == 0), (mode, i)
            else:
                expected = -seq_weight[i] * s[i] * adv[i] / lengths[i]
                torch.testing.assert_close(grad[i, mask[i]], expected.expand(int(lengths[i])))
                assert torch.all(grad[i, ~mask[i]] == 0)
        assert stats["clip_seq/high_frac"] == pytest.approx(1 / 6)
        assert stats["clip_seq/low_frac"] == pytest.approx(1 / 6)


def test_gspo_ratio_is_the_geometric_mean_of_token_ratios():
    token_ratios = torch.tensor([[1.2, 0.9, 1.05, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False]])
    old_logp = torch.full((1, 4), -2.0, dtype=torch.float64)
    logp = torch.where(mask, old_logp + token_ratios.clamp_min(1e-9).log(), torch.zeros_like(old_logp))
    s = (1.2 * 0.9 * 1.05) ** (1 / 3)
    for A in (1.0, -1.0):
        value, _ = L.gspo_loss(logp, old_logp, torch.tensor([A], dtype=torch.float64), mask,
                               eps_low=0.5, eps_high=0.5)
        assert value.item() == pytest.approx(-s * A, rel=1e-12)


def test_old_logp_adv_and_is_weight_receive_no_gradient():
    bt = make_batch(0)
    w = bt["is_weight"].clone().requires_grad_(True)
    old = bt["old_logp"].clone().requires_grad_(True)
    adv = bt["adv"].clone().requires_grad_(True)
    for name in NAMES:
        logp = bt["logp"].clone().requires_grad_(True)
        value, _ = L.LOSSES[name](logp, old, adv, bt["mask"], is_weight=w)
        grads = torch.autograd.grad(value, [logp, w, old, adv], allow_unused=True)
        assert grads[0] is not None
        # old_logp, adv and the IS weight are constants of the loss
        assert all(g is None or torch.all(g == 0) for g in grads[1:]), name


@pytest.mark.parametrize("name", ["ppo", "dapo", "cispo", "sapo"])
def test_loss_stats_are_the_clip_statistics_of_the_ratio(name):
    bt = make_batch(2, spread=0.5)
    _, _, stats = _run(name, bt, bt["adv_tok"], agg="token-mean")
    lo, hi = {"ppo": (0.2, 0.2), "dapo": (0.2, 0.28), "cispo": (None, 0.28), "sapo": (None, None)}[name]
    ratio = torch.exp(bt["logp"] - bt["old_logp"])
    adv_tok = bt["adv_tok"] * bt["mask"]
    expected = ref.clip_stats(ratio.tolist(), adv_tok.tolist(), bt["mask"].tolist(), lo, hi)
    assert set(stats) == set(expected)
    for key, value in expected.items():
        assert stats[key] == pytest.approx(value, rel=1e-6), key


# ---------------------------------------------------------------- c(r, A): the fact sheet's sample values

R = [0.5, 0.79, 0.81, 1.0, 1.19, 1.21, 1.27, 1.29, 2.0, 2.9, 3.1, 5.0, 6.0]


def _c(loss, adv, **kw):
    return L.grad_coefficient(loss, R, adv, **kw).tolist()


def test_grad_coefficient_ppo_sample_values():
    assert _c("ppo", 1.0) == pytest.approx([0.5, 0.79, 0.81, 1, 1.19] + [0] * 8, abs=1e-12)
    assert _c("ppo", -1.0) == pytest.approx([0, 0] + [-r for r in R[2:]], abs=1e-12)
    # verl's dual clip c = 3: -2.9 at r = 2.9, 0 from 3.1 on; without it (TRL) -6 at r = 6
    dual = _c("ppo", -1.0, dual_clip=3.0)
    assert dual == pytest.approx([0, 0] + [-r for r in R[2:10]] + [0, 0, 0], abs=1e-12)
    assert dual[R.index(2.9)] == pytest.approx(-2.9) and dual[R.index(3.1)] == 0.0
    assert _c("ppo", -1.0)[R.index(6.0)] == pytest.approx(-6.0)
    for name in ("grpo", "dr_grpo"):                        # same coefficient, other aggregation
        assert _c(name, 1.0) == pytest.approx(_c("ppo", 1.0), abs=1e-12)
        assert _c(name, -1.0) == pytest.approx(_c("ppo", -1.0), abs=1e-12)


def test_grad_coefficient_dapo_clip_higher_sample_values():
    pos = _c("dapo", 1.0)
    assert pos == pytest.approx([0.5, 0.79, 0.81, 1, 1.19, 1.21, 1.27] + [0] * 6, abs=1e-12)
    assert pos[R.index(1.27)] != 0 and pos[R.index(1.29)] == 0
    assert _c("dapo", -1.0) == pytest.approx([0, 0] + [-r for r in R[2:]], abs=1e-12)
    assert _c("dapo", -1.0, dual_clip=3.0)[R.index(3.1):] == [0.0, 0.0, 0.0]


def test_grad_coefficient_cispo_saturates_at_the_cap_and_is_never_zero():
    verl = _c("cispo", 1.0, eps_low=None, eps_high=0.2)        # verl example: no lower bound, cap 1.2
    assert verl == pytest.approx([0.5, 0.79, 0.81, 1, 1.19] + [1.2] * 8, abs=1e-12)
    assert _c("cispo", -1.0, eps_low=None, eps_high=0.2) == pytest.approx([-c for c in verl], abs=1e-12)
    trl = _c("cispo", 1.0, eps_low=None, eps_high=4.0)         # TRL: absolute cap 5
    assert trl == pytest.approx(R[:-1] + [5.0], abs=1e-12)
    assert all(c != 0 for c in verl + trl)
    # a large eps_low (lower bound 0.01) is as good as none on these ratios
    assert _c("cispo", 1.0, eps_low=0.99, eps_high=0.2) == pytest.approx(verl, abs=1e-12)
    # a real lower bound clips the weight from below instead of dropping the token
    assert _c("cispo", 1.0, eps_low=0.2, eps_high=0.2)[:2] == pytest.approx([0.8, 0.8])


def test_grad_coefficient_sapo_sample_values():
    r = [0.5, 1.0, 2.0, 5.0, 6.0]
    pos = L.grad_coefficient("sapo", r, 1.0).tolist()         # tau_pos = 1.0
    neg = L.grad_coefficient("sapo", r, -1.0).tolist()        # tau_neg = 1.05
    assert [f"{c:.3f}" for c in pos] == ["0.470", "1.000", "1.573", "0.353", "0.160"]
    assert [f"{c:.3f}" for c in neg] == ["-0.467", "-1.000", "-1.536", "-0.291", "-0.125"]
    assert pos == pytest.approx([ref.sapo_coefficient(x, 1.0, 1.0, 1.05) for x in r], rel=1e-12)


def test_grad_coefficient_gspo_one_token_sequences():
    c = L.grad_coefficient("gspo", [0.9995, 1.0, 1.0003, 1.0005], 1.0).tolist()
    assert c == pytest.approx([0.9995, 1.0, 1.0003, 0.0], abs=1e-12)
    c = L.grad_coefficient("gspo", [0.9995, 1.0, 1.0005], -1.0).tolist()
    assert c == pytest.approx([0.0, -1.0, -1.0005], abs=1e-12)


def test_grad_coefficient_rejects_non_positive_ratios():
    with pytest.raises(ValueError, match="ratio must be > 0"):
        L.grad_coefficient("ppo", [1.0, 0.0], 1.0)


# ---------------------------------------------------------------- poisoned padding, whole pipeline

def _pipeline(name, mode, logp, old_logp, ref_logp, rollout_logp, adv, is_weight, mask, kl_kind):
    """Policy loss with a TIS weight and a KL term, as a trainer would assemble them."""
    w = tis_weights(old_logp, rollout_logp, mask) if is_weight is None else is_weight
    pg, _ = L.LOSSES[name](logp, old_logp, adv, mask, agg=mode, is_weight=w)
    return pg + 0.1 * aggregate(kl_estimate(logp, ref_logp, mask, kind=kl_kind), mask, mode)


@pytest.mark.parametrize("kind", POISONS)
@pytest.mark.parametrize("name", NAMES)
def test_poisoned_padding_changes_neither_loss_nor_gradient(name, kind):
    bt = make_batch(3, torch.float32, holes=True)
    mask = bt["mask"]
    tensors = ("logp", "old_logp", "ref_logp", "rollout_logp", "adv_tok", "is_weight")
    bad = {k: poison(bt[k], mask, kind, seed=i) for i, k in enumerate(tensors)}
    clean = {k: torch.where(mask, bt[k], torch.zeros_like(bt[k])) for k in tensors}
    adv_key = "adv" if name == "gspo" else "adv_tok"
    for mode in MODES:
        for kl_kind, use_weight in (("k1", False), ("k2", True), ("k3", False)):
            results = []
            for src in (clean, bad):
                logp = src["logp"].clone().requires_grad_(True)
                adv = bt["adv"] if adv_key == "adv" else src["adv_tok"]
                value = _pipeline(name, mode, logp, src["old_logp"], src["ref_logp"], src["rollout_logp"],
                                  adv, src["is_weight"] if use_weight else None, mask, kl_kind)
                (grad,) = torch.autograd.grad(value, logp)
                results.append((value, grad))
            (v_clean, g_clean), (v_bad, g_bad) = results
            assert torch.isfinite(v_bad) and torch.equal(v_clean, v_bad), (mode, kl_kind)
            assert torch.equal(g_clean, g_bad), (mode, kl_kind)
            assert torch.all(g_bad[~mask] == 0)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("name", NAMES)
def test_bad_tensors_raise_and_name_the_argument(name):
    bt = make_batch(0)
    fn = L.LOSSES[name]
    logp, old, adv, mask = bt["logp"], bt["old_logp"], bt["adv"], bt["mask"]
    with pytest.raises(ValueError, match="mask must have the shape of logp"):
        fn(logp, old, adv, mask[:, :-1])
    with pytest.raises(ValueError, match="mask must be a bool"):
        fn(logp, old, adv, mask.float())
    with pytest.raises(ValueError, match="old_logp must have the shape of logp"):
        fn(logp, old[:, :-1], adv, mask)
    with pytest.raises(ValueError, match="adv must have shape"):
        fn(logp, old, adv[:-1], mask)
    with pytest.raises(ValueError, match="logp must be a torch.Tensor"):
        fn(logp.tolist(), old, adv, mask)
    with pytest.raises(ValueError, match="is_weight must have the shape of logp"):
        fn(logp, old, adv, mask, is_weight=bt["is_weight"][:, :-1])
    with pytest.raises(ValueError, match="mode must be one of"):
        fn(logp, old, adv, mask, agg="sum")
    with pytest.raises(ValueError, match="max_len"):
        fn(logp, old, adv, mask, agg="seq-mean-token-sum-norm", max_len=0)


def test_gspo_rejects_per_token_advantages():
    bt = make_batch(0)
    with pytest.raises(ValueError, match=r"adv must have shape \[B\]=\(6,\) for GSPO"):
        L.gspo_loss(bt["logp"], bt["old_logp"], bt["adv_tok"], bt["mask"])


@pytest.mark.parametrize("name", ["ppo", "grpo", "dapo", "dr_grpo", "gspo", "cispo"])
def test_eps_out_of_range_raises_and_names_the_knob(name):
    bt = make_batch(0)
    args = (bt["logp"], bt["old_logp"], bt["adv"], bt["mask"])
    fn = L.LOSSES[name]
    bad_low = [-0.1, float("nan")] + ([] if name == "cispo" else [1.0])   # CISPO: >= 1 means no bound
    for knob, bad in [("eps_low", b) for b in bad_low] + [("eps_high", -0.01), ("eps_high", "0.2")]:
        with pytest.raises(ValueError, match=knob):
            fn(*args, **{knob: bad})


def test_cispo_accepts_verls_literal_clip_ratio_low_of_10_as_no_lower_bound():
    verl_literal = _c("cispo", -1.0, eps_low=10.0, eps_high=0.2)
    assert verl_literal == pytest.approx(_c("cispo", -1.0, eps_low=None, eps_high=0.2), abs=1e-12)
    assert verl_literal[0] == pytest.approx(-0.5)                     # r = 0.5 keeps its full weight


def test_ppo_family_rejects_dual_clip_at_or_below_one():
    bt = make_batch(0)
    for name in ("ppo", "grpo", "dapo", "dr_grpo"):
        for bad in (1.0, 0.5, "3"):
            with pytest.raises(ValueError, match="dual_clip must be None or a number > 1"):
                L.LOSSES[name](bt["logp"], bt["old_logp"], bt["adv"], bt["mask"], dual_clip=bad)


@pytest.mark.parametrize("knob", ["tau_pos", "tau_neg"])
@pytest.mark.parametrize("bad", [0.0, -1.0, None, True])
def test_sapo_rejects_non_positive_temperatures(knob, bad):
    bt = make_batch(0)
    with pytest.raises(ValueError, match=f"{knob} must be a number > 0"):
        L.sapo_loss(bt["logp"], bt["old_logp"], bt["adv"], bt["mask"], **{knob: bad})


def test_sapo_gate_has_slope_one_at_ratio_one():
    r = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    for tau in (0.5, 1.0, 1.05, 3.0):
        (g,) = torch.autograd.grad(L.sapo_gate(r, tau).sum(), r)
        assert g.item() == pytest.approx(1.0, rel=1e-12)
        gate = L.sapo_gate(torch.tensor([2.0]), tau).item()
        assert gate == pytest.approx(ref.sapo_gate(2.0, tau), rel=1e-6)


def test_gspo_clamps_each_token_log_ratio_at_20_before_the_sequence_mean():
    """Pinned: log r = 30 and -10 give s = exp((20 - 10) / 2) = e^5, not e^10; the clamped token
    carries no gradient, the other one carries c / |y| as usual."""
    old_logp = torch.tensor([[-40.0, -5.0]], dtype=torch.float64)
    logp = (old_logp + torch.tensor([[30.0, -10.0]], dtype=torch.float64)).requires_grad_(True)
    mask = torch.ones(1, 2, dtype=torch.bool)
    adv = torch.tensor([-1.0], dtype=torch.float64)
    value, stats = L.gspo_loss(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.2)
    assert value.item() == pytest.approx(math.exp(5.0), rel=1e-12)        # -min(s A, clip(s) A) = s
    assert stats["ratio/max"] == pytest.approx(math.exp(5.0), rel=1e-12)
    (grad,) = torch.autograd.grad(value, logp)
    # loss = s here (A = -1, s above 1 + eps_high), and d s / d logp_1 = s / 2 (a mean of two)
    assert grad[0].tolist() == pytest.approx([0.0, math.exp(5.0) / 2], rel=1e-12)
    value_ref, grad_ref = ref.gspo_loss(logp.tolist(), old_logp.tolist(), adv.tolist(), mask.tolist(),
                                        eps_low=0.2, eps_high=0.2, agg="seq-mean-token-mean")
    assert value_ref == pytest.approx(value.item(), rel=1e-12)
    assert grad_ref[0][1] == pytest.approx(grad[0, 1].item(), rel=1e-12)
