"""course_lib.sim.ppo: packed GAE, verl's whitening, the tabular policy and its PPO training loop.

The slow references below are written here from the formulas and import nothing from course_lib.
"""
import math

import pytest
import torch

from batches import DTYPES, SEEDS, make_mask, poison, tol
from course_lib import advantages
from course_lib.sim import ppo


# ---- slow references ----------------------------------------------------------------------------

def ref_packed_gae(rewards, values, dones, mask, gamma, lam):
    """Per row, backwards: skip padding, forget the future at every done token. Lists in, lists out."""
    adv_rows, ret_rows = [], []
    for r_row, v_row, d_row, m_row in zip(rewards, values, dones, mask):
        T = len(r_row)
        adv, ret = [0.0] * T, [0.0] * T
        next_v, next_a = 0.0, 0.0
        for t in range(T - 1, -1, -1):
            if not m_row[t]:
                continue
            if d_row[t]:
                next_v, next_a = 0.0, 0.0
            delta = r_row[t] + gamma * next_v - v_row[t]
            a = delta + gamma * lam * next_a
            adv[t], ret[t] = a, a + v_row[t]
            next_v, next_a = v_row[t], a
        adv_rows.append(adv)
        ret_rows.append(ret)
    return adv_rows, ret_rows


def ref_whiten(x, mask, eps=1e-8):
    vals = [v for row, m_row in zip(x, mask) for v, m in zip(row, m_row) if m]
    n = len(vals)
    mean = sum(vals) / n
    var = sum((v - mean) ** 2 for v in vals) / (n - 1)
    return [[(v - mean) / math.sqrt(var + eps) if m else 0.0 for v, m in zip(row, m_row)]
            for row, m_row in zip(x, mask)]


def _random_gae_batch(seed, dtype, B=5, T=9):
    gen = torch.Generator().manual_seed(seed)
    mask = make_mask(gen, B, T, holes=True)
    rewards = torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)
    values = torch.randn(B, T, generator=gen, dtype=torch.float64).to(dtype)
    dones = (torch.rand(B, T, generator=gen) < 0.25) & mask
    return rewards, values, dones, mask


# ---- packed GAE -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma, lam", [(1.0, 1.0), (1.0, 0.95), (0.9, 0.5), (0.99, 0.0)])
def test_packed_gae_matches_slow_reference(seed, dtype, gamma, lam):
    rewards, values, dones, mask = _random_gae_batch(seed, dtype)
    adv, ret = ppo.packed_gae(rewards, values, dones, mask, gamma=gamma, lam=lam)
    ref_adv, ref_ret = ref_packed_gae(rewards.tolist(), values.tolist(), dones.tolist(), mask.tolist(),
                                      gamma, lam)
    torch.testing.assert_close(adv.double(), torch.tensor(ref_adv, dtype=torch.float64), **tol(dtype))
    torch.testing.assert_close(ret.double(), torch.tensor(ref_ret, dtype=torch.float64), **tol(dtype))


@pytest.mark.parametrize("kind", ["random", "nan"])
def test_packed_gae_ignores_poisoned_padding(kind):
    rewards, values, dones, mask = _random_gae_batch(0, torch.float64)
    clean = ppo.packed_gae(rewards, values, dones, mask)
    dirty = ppo.packed_gae(poison(rewards, mask, kind), poison(values, mask, kind, seed=5), dones, mask)
    for a, b in zip(clean, dirty):
        assert torch.equal(a, b) and torch.all(b[~mask] == 0)


@pytest.mark.parametrize("seed", SEEDS)
def test_packed_row_gives_the_advantages_of_separate_rows(seed):
    gen = torch.Generator().manual_seed(seed)
    mask = make_mask(gen, 6, 8)                                   # prefix masks, one empty row
    rewards = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    values = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    separate, sep_ret = advantages.gae(rewards, values, mask, gamma=0.97, lam=0.9)
    r_p, dones = ppo.pack_rows(rewards, mask)
    v_p, _ = ppo.pack_rows(values, mask)
    packed, packed_ret = ppo.packed_gae(r_p, v_p, dones, torch.ones_like(dones), gamma=0.97, lam=0.9)
    torch.testing.assert_close(packed[0], separate[mask], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(packed_ret[0], sep_ret[mask], rtol=1e-12, atol=1e-12)
    no_reset, _ = advantages.gae(r_p, v_p, torch.ones_like(dones), gamma=0.97, lam=0.9)
    assert not torch.allclose(no_reset[0], separate[mask])       # the reset is what makes them agree


def test_packed_gae_without_dones_is_the_one_row_scan():
    rewards, values, _, mask = _random_gae_batch(1, torch.float64)
    got = ppo.packed_gae(rewards, values, torch.zeros_like(mask), mask, gamma=0.9, lam=0.8)
    want = advantages.gae(rewards, values, mask, gamma=0.9, lam=0.8)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_pack_rows_hand_example():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False], [False, False, False]])
    packed, dones = ppo.pack_rows(x, mask)
    assert packed.tolist() == [[1.0, 2.0, 3.0, 4.0, 5.0]]
    assert dones.tolist() == [[False, False, True, False, True]]


@pytest.mark.parametrize("kwargs, word", [
    (dict(dones=torch.zeros(2, 3)), "dones"),                            # not bool
    (dict(dones=torch.zeros(2, 4, dtype=torch.bool)), "dones"),          # wrong shape
    (dict(gamma=1.5), "gamma"), (dict(lam=-0.1), "lam"), (dict(lam=True), "lam"),
    (dict(values=torch.zeros(2, 4)), "values"), (dict(mask=torch.ones(2, 3)), "mask"),
])
def test_packed_gae_rejects_bad_input_naming_the_argument(kwargs, word):
    args = dict(rewards=torch.zeros(2, 3), values=torch.zeros(2, 3),
                dones=torch.zeros(2, 3, dtype=torch.bool), mask=torch.ones(2, 3, dtype=torch.bool))
    args.update(kwargs)
    gamma, lam = args.pop("gamma", 1.0), args.pop("lam", 0.95)
    with pytest.raises(ValueError, match=word):
        ppo.packed_gae(args["rewards"], args["values"], args["dones"], args["mask"], gamma=gamma, lam=lam)


# ---- whitening ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_masked_whiten_matches_reference_with_bessel_variance(seed, dtype):
    gen = torch.Generator().manual_seed(seed)
    mask = make_mask(gen, 6, 7, holes=True)
    x = (3 + 2 * torch.randn(6, 7, generator=gen, dtype=torch.float64)).to(dtype)
    got = ppo.masked_whiten(poison(x, mask, "nan"), mask)
    want = torch.tensor(ref_whiten(x.tolist(), mask.tolist()), dtype=torch.float64)
    torch.testing.assert_close(got.double(), want, **tol(dtype))
    v = got[mask].double()
    assert abs(float(v.mean())) < 1e-5 and abs(float(v.var()) - 1) < 1e-5   # torch var is Bessel too
    assert torch.all(got[~mask] == 0)


def test_masked_whiten_ignores_scale_and_shift():
    gen = torch.Generator().manual_seed(0)
    mask = make_mask(gen, 5, 6)
    x = torch.randn(5, 6, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(ppo.masked_whiten(10 * x + 3, mask), ppo.masked_whiten(x, mask),
                               rtol=1e-6, atol=1e-6)


def test_masked_whiten_needs_two_valid_tokens():
    with pytest.raises(ValueError, match="mask"):
        ppo.masked_whiten(torch.zeros(2, 2), torch.tensor([[True, False], [False, False]]))


def test_outcome_token_rewards_puts_the_reward_on_the_last_valid_token():
    mask = torch.tensor([[True, True, False], [True, True, True], [False, False, False]])
    got = ppo.outcome_token_rewards(torch.tensor([0.5, 1.0, 2.0]), mask)
    assert got.tolist() == [[0.0, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def test_model_state_gib_counts_16_bytes_trained_2_frozen():
    assert ppo.model_state_gib(2**30, trained=1, frozen=0) == 16
    assert ppo.model_state_gib(2**30, trained=2, frozen=1) == 34


# ---- tabular policy and training -------------------------------------------------------------------

def test_token_logp_matches_a_softmax_by_hand():
    logits = ppo.init_logits(3, T=4, V=5)
    tokens = torch.tensor([[0, 4, 2, 1], [3, 3, 0, 4]])
    got = ppo.token_logp(logits, tokens)
    for b in range(2):
        for t in range(4):
            row = logits[t].tolist()
            want = row[tokens[b, t]] - math.log(sum(math.exp(v) for v in row))
            assert abs(float(got[b, t]) - want) < 1e-12


def test_sample_batch_is_seeded_and_rewards_the_share_of_good_tokens():
    logits = ppo.init_logits(0)
    a = ppo.sample_batch(logits, 4, 3, torch.Generator().manual_seed(7))
    b = ppo.sample_batch(logits, 4, 3, torch.Generator().manual_seed(7))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    tokens, mask, rewards = a
    assert tokens.shape == mask.shape == (12, 8) and rewards.shape == (12,)
    for i in range(12):
        n = int(mask[i].sum())
        assert 2 <= n <= 8 and bool(mask[i, :n].all())
        good = sum(1 for t in range(n) if int(tokens[i, t]) < ppo.GOOD_TOKENS)
        assert abs(float(rewards[i]) - good / n) < 1e-12


@pytest.mark.parametrize("seed", SEEDS)
def test_one_update_per_batch_sees_ratio_one_so_the_clip_range_changes_nothing(seed):
    kw = dict(seed=seed, n_batches=6, updates_per_batch=1)
    wide = ppo.train_tabular(eps_low=0.2, eps_high=0.2, **kw)
    narrow = ppo.train_tabular(eps_low=0.01, eps_high=0.01, **kw)
    assert wide["ratio_max"] == [1.0] * 6 and wide["binding_frac"] == [0.0] * 6
    assert torch.equal(wide["logits"], narrow["logits"])
    assert max(abs(x) for x in wide["pg_loss"]) < 1e-12 and min(wide["grad_norm"]) > 0
    braked = ppo.train_tabular(beta=0.5, **kw)
    assert not torch.equal(wide["logits"], braked["logits"]) and braked["kl"][-1] < wide["kl"][-1]


@pytest.mark.parametrize("seed", SEEDS)
def test_several_updates_on_one_batch_make_the_clip_bind(seed):
    log = ppo.train_tabular(seed=seed, n_batches=1, updates_per_batch=10)
    assert log["update"] == list(range(10)) and log["ratio_max"][0] == 1.0
    assert log["binding_frac"][0] == 0.0 and log["binding_frac"][-1] > 0.05
    assert log["ratio_max"][-1] > 1.2
    narrow = ppo.train_tabular(seed=seed, n_batches=1, updates_per_batch=10, eps_low=0.01, eps_high=0.01)
    assert not torch.equal(log["logits"], narrow["logits"])


def test_train_tabular_restores_the_thread_count_and_rejects_bad_updates():
    before = torch.get_num_threads()
    ppo.train_tabular(seed=0, n_batches=1, updates_per_batch=1)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="updates_per_batch"):
        ppo.train_tabular(seed=0, n_batches=1, updates_per_batch=0)


def ref_binding_share(log):
    """Slow reference: count the binding and the out-of-range tokens update by update."""
    binding = outside = 0
    for i in range(len(log["n_tokens"])):
        n = log["n_tokens"][i]
        binding += int(log["binding_frac"][i] * n + 0.5)
        outside += int(log["outside_frac"][i] * n + 0.5)
    return binding / outside


def test_binding_share_pools_tokens_not_fractions():
    # update 1: 1 of 2 outside tokens binds (of 10); update 2: 30 of 40 (of 100). Pooled 31/42;
    # the unweighted mean of the two shares (0.625) or of the fractions ((0.1+0.3)/(0.2+0.4)) is not it.
    log = dict(binding_frac=[0.1, 0.3], outside_frac=[0.2, 0.4], n_tokens=[10, 100])
    assert ppo.binding_share(log) == ref_binding_share(log) == 31 / 42
    assert abs(31 / 42 - 0.625) > 0.1 and abs(31 / 42 - 0.4 / 0.6) > 0.05


@pytest.mark.parametrize("seed", SEEDS)
def test_binding_share_of_a_real_run_matches_the_token_count(seed):
    log = ppo.train_tabular(seed=seed, n_batches=3, updates_per_batch=5)
    for b, o, n in zip(log["binding_frac"], log["outside_frac"], log["n_tokens"]):
        assert abs(b * n - round(b * n)) < 1e-3 and abs(o * n - round(o * n)) < 1e-3 and b <= o   # float32 fractions
    assert ppo.binding_share(log) == ref_binding_share(log)
    assert 0.5 < ppo.binding_share(log) <= 1.0          # the updates move ratios the way A pushes them


def test_binding_share_rejects_a_log_without_out_of_range_tokens():
    with pytest.raises(ValueError, match="no out-of-range token"):
        ppo.binding_share(ppo.train_tabular(seed=0, n_batches=2, updates_per_batch=1))
    with pytest.raises(ValueError, match="n_tokens"):
        ppo.binding_share(dict(binding_frac=[0.1], outside_frac=[0.2]))
