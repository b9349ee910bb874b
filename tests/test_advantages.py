"""course_lib.advantages: GRPO, Dr. GRPO, RLOO, DAPO's signal filter, GAE."""
import math

import pytest
import torch

import reference as ref
from batches import DTYPES, SEEDS, make_mask, tol
from course_lib import advantages as A
from course_lib import aggregation


def _rewards(seed, dtype, P=4, G=4, binary=False):
    """Rewards [P*G]: group 0 all equal (zero std), group 1 G-1 equal and one different."""
    gen = torch.Generator().manual_seed(seed)
    if binary:
        r = (torch.rand(P * G, generator=gen) > 0.5).to(dtype)
    else:
        r = torch.randn(P * G, generator=gen, dtype=torch.float64).to(dtype)
    r[:G] = r[0]
    r[G:2 * G - 1] = 0.5
    r[2 * G - 1] = 1.5
    return r


def _close(actual, expected, dtype):
    torch.testing.assert_close(actual.double(), torch.tensor(expected, dtype=torch.float64),
                               **tol(dtype))


# ---------------------------------------------------------------- values against the loops

@pytest.mark.parametrize("G", [2, 4, 5])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_group_advantages_match_loop_reference(seed, dtype, G):
    for binary in (False, True):
        r = _rewards(seed, dtype, G=G, binary=binary)
        for eps in (1e-6, 1e-4, 0.0):
            _close(A.group_advantages(r, G, eps=eps), ref.group_advantages(r.tolist(), G, eps=eps), dtype)
        _close(A.group_advantages(r, G, scale=False), ref.dr_grpo_advantages(r.tolist(), G), dtype)
        _close(A.dr_grpo_advantages(r, G), ref.dr_grpo_advantages(r.tolist(), G), dtype)
        _close(A.rloo_advantages(r, G), ref.rloo_advantages(r.tolist(), G), dtype)
        _close(A.batch_std_advantages(r, G), ref.batch_std_advantages(r.tolist(), G), dtype)
        assert A.signal_groups(r, G).tolist() == ref.signal_groups(r.tolist(), G)


def _naive(name, r_grp):
    """The formulas without the all-equal rule, in plain torch: r_grp [P, G] -> [P, G]."""
    centred = r_grp - r_grp.mean(dim=1, keepdim=True)
    if name == "grpo":
        return centred / (r_grp.std(dim=1, keepdim=True) + 1e-6)
    if name == "dr_grpo":
        return centred
    G = r_grp.shape[1]
    return r_grp - (r_grp.sum(dim=1, keepdim=True) - r_grp) / (G - 1)       # rloo


@pytest.mark.parametrize("name, fn", [("grpo", A.group_advantages), ("dr_grpo", A.dr_grpo_advantages),
                                      ("rloo", A.rloo_advantages)])
def test_all_equal_group_gets_exactly_zero_where_the_naive_formula_leaves_a_residue(name, fn):
    # eight equal rewards of 0.3 or 0.7: their float32 mean is not exact, so (R - mean) is a
    # rounding residue (about 3e-8), which GRPO's division by std + eps blows up to 0.03-0.06
    r = torch.tensor([0.3] * 8 + [0.7] * 8 + [1.0, 0.0] * 4, dtype=torch.float32)
    naive = _naive(name, r.view(3, 8))                                     # [P, G]
    assert torch.all(naive[:2].abs().amax(dim=1) > 0)                     # the residue is there
    if name == "grpo":
        assert naive[:2].abs().max().item() > 0.02
    adv = fn(r, 8)
    assert adv.dtype == torch.float32 and adv.shape == (24,)
    assert torch.all(adv[:16] == 0)                                        # the rule: exactly 0
    torch.testing.assert_close(adv[16:], naive[2])                         # the signal group is kept


def test_group_size_two_gives_plus_minus_one_over_sqrt2_and_rloo_twice_dr_grpo():
    r = torch.tensor([1.0, 0.0, 3.0, 5.0], dtype=torch.float64)
    adv = A.group_advantages(r, 2, eps=0.0)
    # two rewards: Bessel std = |R1 - R2| / sqrt(2), so A = +-1/sqrt(2) whatever the gap
    torch.testing.assert_close(adv, torch.tensor([1, -1, -1, 1], dtype=torch.float64) / math.sqrt(2))
    torch.testing.assert_close(A.rloo_advantages(r, 2), 2 * A.dr_grpo_advantages(r, 2))


@pytest.mark.parametrize("G", [2, 3, 8])
def test_rloo_equals_g_over_g_minus_1_times_dr_grpo(G):
    r = torch.randn(5 * G, generator=torch.Generator().manual_seed(G), dtype=torch.float64)
    torch.testing.assert_close(A.rloo_advantages(r, G), G / (G - 1) * A.dr_grpo_advantages(r, G))


def test_advantages_are_constants_without_gradient():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0], requires_grad=True)
    for fn in (A.group_advantages, A.dr_grpo_advantages, A.rloo_advantages):
        assert not fn(r, 4).requires_grad


def test_signal_groups_marks_all_equal_groups_false_and_handles_group_size_one():
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    assert A.signal_groups(r, 3).tolist() == [False, True, False]
    assert A.signal_groups(r, 1).tolist() == [False] * 9


@pytest.mark.parametrize("G", [1, 2, 4, 8])
def test_signal_probability_matches_enumeration_of_all_outcomes(G):
    for p in (0.0, 0.1, 0.5, 0.93, 1.0):
        assert A.signal_probability(p, G).item() == pytest.approx(ref.signal_probability(p, G), abs=1e-12)
        expected = G / ref.signal_probability(p, G) if ref.signal_probability(p, G) > 0 else math.inf
        assert A.samples_per_useful_group(p, G).item() == pytest.approx(expected, rel=1e-12)
    rates = torch.tensor([0.2, 0.7], dtype=torch.float64)
    assert A.signal_probability(rates, G).tolist() == pytest.approx(
        [ref.signal_probability(0.2, G), ref.signal_probability(0.7, G)], abs=1e-12)


# ---------------------------------------------------------------- seed 000's figures

def test_seed_group_advantages_plus_minus_0866():
    adv = A.group_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), 4)
    assert [f"{a:+.3f}" for a in adv.tolist()] == ["+0.866", "-0.866", "+0.866", "-0.866"]
    assert [round(a, 2) for a in adv.tolist()] == [0.87, -0.87, 0.87, -0.87]
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    adv = A.group_advantages(r, 4)
    implied_std = (r[0] - r.mean()) / adv[0]          # (R - mean) / A = std + eps
    assert f"{implied_std:.3f}" == "0.577"


def test_seed_rloo_g5_example():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    adv = A.rloo_advantages(r, 5)
    assert adv.tolist() == pytest.approx([0.5, -0.75, -0.75, 0.5, 0.5], abs=1e-12)
    torch.testing.assert_close(adv, 1.25 * (r - 0.6))


def test_seed_000_token_weight_table():
    """Seed 000's table: rewards [1,0,0,1], lengths [200,50,2000,400], seq-mean vs token-mean."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    lengths = torch.tensor([200, 50, 2000, 400])
    adv = A.group_advantages(rewards, 4)                                  # [B]
    mask = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]   # [B, T]
    rows = []
    for mode in ("seq-mean-token-mean", "token-mean"):
        alpha = aggregation.token_weights(mask, mode)                     # [B, T]
        per_token = adv.double() * alpha[:, 0]                            # first token of each row
        total = (adv.double()[:, None] * alpha).sum(dim=1)
        rows.append(([f"{w:+.2e}" for w in per_token.tolist()], [f"{w:+.3f}" for w in total.tolist()]))
    (seq_tok, seq_tot), (tok_tok, tok_tot) = rows
    assert seq_tok == ["+1.08e-03", "-4.33e-03", "-1.08e-04", "+5.41e-04"]
    assert tok_tok == ["+3.27e-04", "-3.27e-04", "-3.27e-04", "+3.27e-04"]
    assert seq_tot == ["+0.217", "-0.217", "-0.217", "+0.217"]
    assert tok_tot == ["+0.065", "-0.016", "-0.654", "+0.131"]


# ---------------------------------------------------------------- GAE

def _gae_inputs(seed, dtype, holes):
    gen = torch.Generator().manual_seed(seed)
    B, T = 6, 8
    rewards = torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)
    values = torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)
    mask = make_mask(gen, B, T, holes)
    return rewards, values, mask


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_gae_matches_discounted_sum_of_deltas(seed, dtype, holes):
    rewards, values, mask = _gae_inputs(seed, dtype, holes)
    for gamma, lam in ((1.0, 0.95), (0.9, 0.8), (1.0, 1.0), (0.99, 0.0)):
        adv, ret = A.gae(rewards, values, mask, gamma=gamma, lam=lam)
        ref_adv, ref_ret = ref.gae(rewards.tolist(), values.tolist(), mask.tolist(), gamma, lam)
        _close(adv, ref_adv, dtype)
        _close(ret, ref_ret, dtype)


def test_gae_does_not_bootstrap_past_the_last_valid_token():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.6, 0.7, 9.0, 9.0]])       # 9.0 sits on padding after EOS
    mask = torch.tensor([[True, True, True, False, False]])
    adv, ret = A.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    # lam = gamma = 1: A_t = (sum of rewards from t on) - V_t, with nothing after EOS
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.4, 0.3, 0.0, 0.0]]))
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]]))


def test_gae_ignores_padded_rewards_and_values_and_skips_inner_masked_tokens():
    rewards, values, mask = _gae_inputs(4, torch.float64, holes=True)
    adv, ret = A.gae(rewards, values, mask)
    r2 = torch.where(mask, rewards, torch.full_like(rewards, 1e4))
    v2 = torch.where(mask, values, torch.full_like(values, float("nan")))
    adv2, ret2 = A.gae(r2, v2, mask)
    assert torch.equal(adv, adv2) and torch.equal(ret, ret2)
    assert torch.all(adv[~mask] == 0) and torch.all(ret[~mask] == 0)


def test_gae_one_token_response_is_reward_minus_value():
    rewards = torch.tensor([[2.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 3.0, 3.0]])
    mask = torch.tensor([[True, False, False]])
    adv, ret = A.gae(rewards, values, mask, gamma=0.9, lam=0.9)
    assert adv.tolist() == [[1.5, 0.0, 0.0]] and ret.tolist() == [[2.0, 0.0, 0.0]]


# ---------------------------------------------------------------- bad input

def test_group_size_not_dividing_batch_raises_and_names_both():
    with pytest.raises(ValueError, match=r"B=6.*group_size=4"):
        A.group_advantages(torch.zeros(6), 4)
    with pytest.raises(ValueError, match="group_size"):
        A.rloo_advantages(torch.zeros(6), 4)
    with pytest.raises(ValueError, match="group_size"):
        A.signal_groups(torch.zeros(6), 4)


@pytest.mark.parametrize("G", [0, 1, 2.0, True, "4"])
def test_group_size_below_two_or_not_int_raises(G):
    with pytest.raises(ValueError, match="group_size must be an int >= 2"):
        A.group_advantages(torch.zeros(4), G)
    with pytest.raises(ValueError, match="group_size"):
        A.rloo_advantages(torch.zeros(4), G)


@pytest.mark.parametrize("eps", [-1e-6, float("nan"), "1e-6"])
def test_group_advantages_eps_out_of_range_raises(eps):
    with pytest.raises(ValueError, match="eps"):
        A.group_advantages(torch.tensor([1.0, 0.0]), 2, eps=eps)
    with pytest.raises(ValueError, match="eps"):
        A.batch_std_advantages(torch.tensor([1.0, 0.0]), 2, eps=eps)


def test_the_batch_std_keeps_a_small_spread_small_where_the_group_std_blows_it_up():
    """Two groups: one differing in a 0.5 format term only, one in correctness. The group std makes
    both +-0.866; the batch std leaves the first half the size of the second."""
    r = torch.tensor([0.5, 0.0, 0.0, 0.5, 1.5, 0.0, 0.0, 1.5])
    g, b = A.group_advantages(r, 4), A.batch_std_advantages(r, 4)
    assert torch.allclose(g[:4].abs(), g[4:].abs())
    assert torch.allclose(b[:4] * 3, b[4:])


def test_advantage_inputs_must_be_float_vectors():
    with pytest.raises(ValueError, match="rewards must be a torch.Tensor"):
        A.group_advantages([1.0, 0.0], 2)
    with pytest.raises(ValueError, match=r"rewards must have shape \[B\]"):
        A.group_advantages(torch.zeros(2, 2), 2)
    with pytest.raises(ValueError, match="rewards must be a floating-point"):
        A.rloo_advantages(torch.tensor([1, 0]), 2)


def test_signal_probability_rejects_rates_outside_0_1_and_bad_group_size():
    with pytest.raises(ValueError, match="pass_rate"):
        A.signal_probability(1.5, 4)
    with pytest.raises(ValueError, match="group_size"):
        A.signal_probability(0.5, 0)


def test_gae_bad_input_names_the_argument():
    r, v = torch.zeros(2, 3), torch.zeros(2, 3)
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="values must have the shape of rewards"):
        A.gae(r, torch.zeros(2, 4), mask)
    with pytest.raises(ValueError, match="mask"):
        A.gae(r, v, torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask"):
        A.gae(r, v, torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="gamma"):
        A.gae(r, v, mask, gamma=1.5)
    with pytest.raises(ValueError, match="lam"):
        A.gae(r, v, mask, lam=-0.1)
    with pytest.raises(ValueError, match="rewards must be a torch.Tensor"):
        A.gae([[0.0]], v, mask)
