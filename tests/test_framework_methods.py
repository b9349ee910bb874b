"""The other losses, advantage estimators and the aggregation mode verl 0.9.1 and TRL 1.16.0 select
(losses.FRAMEWORK_LOSSES, advantages.*, aggregation token-sum), against the loops of reference.py.

The same functions are checked against verl's and TRL's own code in tests/peers/test_verl_functions.py.
"""
import math

import pytest
import torch

import reference as ref
from batches import make_batch, poison, tol
from course_lib import advantages as A
from course_lib import aggregation
from course_lib import losses as L

AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm", "token-sum")
SEEDS = (0, 1)


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


def _batch(seed, dtype=torch.float64, probabilities=False):
    bt = make_batch(seed, dtype, B=8, T=7, spread=0.4)
    if probabilities:                      # losses that read pi itself need logp < 0
        bt["logp"] = bt["logp"].clamp(max=-1e-3)
    return bt


def _lib(name, bt, *, agg, is_weight=None, **knobs):
    logp = bt["logp"].clone().requires_grad_(True)
    value, stats = L.resolve_loss(name)(logp, bt["old_logp"], bt["adv"], bt["mask"], agg=agg,
                                        is_weight=is_weight, **knobs)
    (grad,) = torch.autograd.grad(value, logp)
    return value, grad, stats


def _ref(fn, bt, *, agg, is_weight=None, **knobs):
    return fn(bt["logp"].tolist(), bt["old_logp"].tolist(), bt["adv"].tolist(), bt["mask"].tolist(),
              agg=agg, is_weight=None if is_weight is None else is_weight.tolist(), **knobs)


# name -> (reference, knob settings tried besides the defaults, needs logp < 0)
CASES = {
    "gpg": (ref.gpg_loss, [{}], False),
    "dppo_tv": (lambda *a, **k: ref.dppo_loss(*a, divergence="tv", **k),
                [{}, dict(delta_low=0.05, delta_high=0.03, trunc=1.3)], True),
    "dppo_kl": (lambda *a, **k: ref.dppo_loss(*a, divergence="kl", **k),
                [{}, dict(delta_low=0.01, delta_high=0.005, trunc=1.3)], True),
    "dro": (ref.dro_loss, [{}, dict(beta=0.3)], False),
    "gmpo": (ref.gmpo_loss, [{}, dict(eps_low=0.1, eps_high=0.3)], False),
    "luspo": (lambda *a, **k: ref.gspo_loss(*a, **{"eps_low": 3e-4, "eps_high": 4e-4, **k}),
              [{}, dict(eps_low=0.2, eps_high=0.3)], False),
    "vespo": (ref.vespo_loss, [{}, dict(k_pos=1.0, lambda_pos=0.5, k_neg=4.0, lambda_neg=1.0)], False),
    "kl_cov": (ref.kl_cov_loss, [{}, dict(kl_ratio=0.2, kl_coef=0.5)], False),
}


def test_framework_losses_are_registered_apart_from_the_course_losses():
    assert L.framework_losses() == sorted([*CASES, "clip_cov"])
    assert not set(L.framework_losses()) & set(L.available_losses())
    assert all(L.resolve_loss(n) is L.FRAMEWORK_LOSSES[n] for n in L.framework_losses())
    with pytest.raises(KeyError, match="already registered"):
        L.register_loss("dppo_tv")(lambda *a, **k: None)


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("name", list(CASES))
def test_framework_loss_matches_its_loop_reference_with_and_without_is_weight(name, agg):
    fn, settings, probs = CASES[name]
    for seed in SEEDS:
        bt = _batch(seed, probabilities=probs)
        for knobs in settings:
            for w in (None, bt["is_weight"]):
                value, grad, _ = _lib(name, bt, agg=agg, is_weight=w, **knobs)
                want_v, want_g = _ref(fn, bt, agg=agg, is_weight=w, **knobs)
                torch.testing.assert_close(value, _t(want_v), **tol(torch.float64))
                torch.testing.assert_close(grad, _t(want_g), **tol(torch.float64), msg=f"{name} {knobs}")


@pytest.mark.parametrize("name", list(CASES) + ["clip_cov"])
def test_framework_loss_in_float32_agrees_and_ignores_nan_padding(name):
    probs = CASES.get(name, (None, None, False))[2]
    bt = _batch(2, torch.float32, probabilities=probs)
    kw = dict(cov_ratio=1.0) if name == "clip_cov" else {}
    value, grad, _ = _lib(name, bt, agg="token-mean", **kw)
    bt64 = _batch(2, probabilities=probs)
    v64, g64, _ = _lib(name, bt64, agg="token-mean", **kw)
    torch.testing.assert_close(value.double(), v64, **tol(torch.float32))
    torch.testing.assert_close(grad.double(), g64, **tol(torch.float32))
    bad = dict(bt64, logp=poison(bt64["logp"], bt64["mask"], "nan"),
               old_logp=poison(bt64["old_logp"], bt64["mask"], "huge"))
    v_bad, g_bad, _ = _lib(name, bad, agg="token-mean", **kw)
    torch.testing.assert_close(v_bad, v64)
    torch.testing.assert_close(g_bad, g64)
    assert bool((g_bad[~bt64["mask"]] == 0).all())


@pytest.mark.parametrize("name", list(CASES))
def test_on_policy_every_framework_loss_gradient_is_reinforce(name):
    c = L.grad_coefficient(name, [1.0, 1.0], 0.7)
    torch.testing.assert_close(c, _t([0.7, 0.7]))


def test_clip_cov_detaches_every_candidate_when_the_ratio_allows_and_draws_reproducibly():
    for seed in SEEDS:
        bt = _batch(seed)
        args = [x.tolist() for x in (bt["logp"], bt["old_logp"], bt["adv"])] + [bt["mask"].tolist()]
        cands = ref.clip_cov_candidates(*args, 0.2, 0.2, 0.05, 5.0)
        assert 2 <= len(cands) < int(bt["mask"].sum())
        value, grad, _ = _lib("clip_cov", bt, agg="token-mean", cov_ratio=1.0, cov_lb=0.05)
        want_v, want_g = ref.clip_cov_loss(*args, detached=cands, agg="token-mean")
        torch.testing.assert_close(value, _t(want_v))
        torch.testing.assert_close(grad, _t(want_g))
        # a small ratio detaches max(1, int(ratio N)) of the candidates, the same ones for the same seed
        n = int(bt["mask"].sum())
        draws = [_lib("clip_cov", bt, agg="token-mean", cov_ratio=2.5 / n, cov_lb=0.05,
                      generator=torch.Generator().manual_seed(s))[1] for s in (3, 3, 4)]
        _, full_g = ref.clip_cov_loss(*args, detached=set(), agg="token-mean")
        lost = [{tuple(i) for i in torch.nonzero((g == 0) & (_t(full_g) != 0)).tolist()} for g in draws]
        assert len(lost[0]) == 2 and lost[0] <= cands and lost[0] == lost[1]


def test_luspo_is_gspo_weighted_by_length_and_gmpo_differs_from_gspo():
    bt = _batch(0)
    a = L.luspo_loss(bt["logp"], bt["old_logp"], bt["adv"], bt["mask"])[0]
    b = L.gspo_loss(bt["logp"], bt["old_logp"], bt["adv"], bt["mask"], agg="seq-mean-token-sum")[0]
    assert float(a) == float(b)
    g = L.gmpo_loss(bt["logp"], bt["old_logp"], bt["adv"], bt["mask"], eps_low=3e-4, eps_high=4e-4)[0]
    assert abs(float(g) - float(L.gspo_loss(bt["logp"], bt["old_logp"], bt["adv"], bt["mask"])[0])) > 1e-3


def test_dppo_masks_on_the_probability_not_the_ratio():
    # a rare token (pi_old = 0.01) at ratio 3 moves its probability by 0.02: inside a TV region of 0.05,
    # where PPO's clip at 1.2 already binds; a common one (0.6 -> 0.7, ratio 1.17) is outside it
    old = torch.log(_t([[0.01], [0.6]]))
    logp = torch.log(_t([[0.03], [0.7]]))
    keep = L.dppo_keep(logp, old, _t([[1.0], [1.0]]), torch.ones(2, 1, dtype=torch.bool), "tv", 0.05, 0.05)
    assert keep[:, 0].tolist() == [True, False]


# ---- aggregation ---------------------------------------------------------------------------------
def test_token_sum_matches_the_reference_and_is_kept_out_of_the_four_modes():
    bt = _batch(1)
    x = bt["logp"]
    torch.testing.assert_close(aggregation.aggregate(x, bt["mask"], "token-sum"),
                               _t(ref.aggregate(x.tolist(), bt["mask"].tolist(), "token-sum")))
    assert aggregation.token_weights(bt["mask"], "token-sum").tolist() == \
        ref.token_weights(bt["mask"].tolist(), "token-sum")
    assert "token-sum" not in aggregation.AGGREGATIONS and set(aggregation.MODES) - set(aggregation.AGGREGATIONS) == {"token-sum"}


# ---- advantages ----------------------------------------------------------------------------------
def _adv_inputs(seed, P=3, G=4, T=6, holes=True):
    g = torch.Generator().manual_seed(seed)
    B = P * G
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    if holes:
        mask[0, 1] = False
    rew = torch.rand(B, generator=g, dtype=torch.float64)
    r_tok = torch.randn(B, T, generator=g, dtype=torch.float64) * mask
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 2
    p = old.exp()
    sum_sq = p ** 2 + (1 - p) ** 2 * torch.rand(B, T, generator=g, dtype=torch.float64)
    w = 0.5 + torch.rand(B, T, generator=g, dtype=torch.float64)
    return G, mask, rew, r_tok, old, sum_sq, w


def _close(actual, expected):
    torch.testing.assert_close(actual, _t(expected), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_token_level_estimators_match_their_loops(seed):
    G, mask, rew, r_tok, old, sum_sq, w = _adv_inputs(seed)
    m = mask.tolist()
    _close(A.whiten(r_tok, mask), ref.whiten(r_tok.tolist(), m))
    for gamma in (1.0, 0.9):
        _close(A.discounted_returns(r_tok, mask, gamma), ref.discounted_returns(r_tok.tolist(), m, gamma))
        _close(A.reinforce_pp_advantages(r_tok, mask, gamma=gamma), ref.reinforce_pp(r_tok.tolist(), m, gamma))
    _close(A.reinforce_pp_baseline_advantages(rew, mask, G), ref.reinforce_pp_baseline(rew.tolist(), m, G))
    greedy = rew.flip(0)
    _close(A.remax_advantages(r_tok, greedy, mask), ref.remax(r_tok.tolist(), greedy.tolist(), m))
    comps = torch.stack([rew, (rew > 0.5).double()], 1)
    for scale in (True, False):
        _close(A.gdpo_advantages(comps, G, mask, weights=[1.0, 0.5], scale=scale),
               ref.gdpo(comps.tolist(), G, m, [1.0, 0.5], scale=scale))


@pytest.mark.parametrize("seed", SEEDS)
def test_sequence_level_estimators_match_their_loops(seed):
    G, mask, rew, *_ = _adv_inputs(seed)
    rew[:G] = 0.25                                                     # a group without signal
    lengths = mask.sum(-1)
    _close(A.opo_advantages(rew, G, lengths), ref.opo(rew.tolist(), G, lengths.tolist()))
    for scale in (True, False):
        _close(A.passk_advantages(rew, G, scale=scale), ref.passk(rew.tolist(), G, scale=scale))
    sparse = torch.where(torch.arange(len(rew)) % 3 == 0, torch.zeros_like(rew), rew)
    _close(A.gpg_advantages(sparse, G), ref.gpg(sparse.tolist(), G))
    assert A.opo_advantages(rew, G, lengths)[:G].tolist() == [0.0] * G


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_optimal_token_baselines_match_their_loop(seed, holes):
    G, mask, rew, r_tok, old, sum_sq, w = _adv_inputs(seed, holes=holes)
    args = [x.tolist() for x in (r_tok, mask)] + [G] + [x.tolist() for x in (old, sum_sq)]
    for zero_tail in (True, False):
        for is_weight in (None, w):
            kw = dict(is_weight=is_weight, zero_tail=zero_tail)
            rkw = dict(is_weight=None if is_weight is None else is_weight.tolist(), zero_tail=zero_tail)
            _close(A.optimal_token_baseline_advantages(r_tok, mask, G, old, sum_sq, **kw),
                   ref.optimal_token_baseline(*args, **rkw))
            _close(A.tir_optimal_token_baseline_advantages(r_tok, mask, G, old, sum_sq, **kw),
                   ref.optimal_token_baseline(*args, **rkw, by_valid_index=True))


def test_reinforce_pp_normalises_over_the_batchs_tokens_not_its_responses():
    # two responses, rewards 1 and 0, lengths 3 and 1: the token mean is 3/4, not the response mean 1/2
    mask = torch.tensor([[True, True, True], [True, False, False]])
    adv = A.reinforce_pp_advantages(A.last_token_rewards(_t([1.0, 0.0]), mask), mask)
    mean, std = 0.75, math.sqrt((3 * 0.25 ** 2 + 0.75 ** 2) / 3)
    torch.testing.assert_close(adv, _t([[0.25 / std] * 3, [-mean / std, 0, 0]]), rtol=1e-6, atol=1e-8)
