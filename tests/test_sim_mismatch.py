"""Chapter 06's simulations: the seed's figures, and exact bias/noise against brute-force references."""
import math

import pytest
import torch

from course_lib.sim import mismatch


def test_seed_ratio_figures_match_the_source_chapter():
    b = mismatch.seed_bandit()
    rho = b.pi / b.mu
    assert (f"{rho.median():.2f}", f"{rho.max():.1f}", f"{rho.min():.2f}") == ("0.95", "19.7", "0.56")


def test_seed_table_matches_the_source_chapter_to_the_printed_digit():
    got = {k: (f"{100 * b:.1f}", f"{100 * s:.1f}") for k, (b, s) in mismatch.seed_table().items()}
    assert got == {"none": ("42.5", "30.3"), "is": ("2.4", "54.8"),
                   "tis": ("23.6", "30.6"), "mis": ("26.8", "29.6")}


def _brute_estimate(b, kind, a, cap):
    """The source chapter's estimator, written out with the [n, V] score matrix and the weights by hand."""
    V = b.pi.numel()
    ratio = b.pi[a] / b.mu[a]
    w = {"none": torch.ones_like(ratio), "is": ratio, "tis": ratio.clamp(max=cap),
         "mis": ratio * (ratio <= cap)}[kind]
    score = torch.eye(V)[a] - b.pi
    return (w * b.adv[a])[:, None].mul(score).mean(0)


@pytest.mark.parametrize("kind", mismatch.KINDS)
def test_fast_estimate_equals_the_score_matrix_form(kind):
    b = mismatch.seed_bandit()
    gen = torch.Generator().manual_seed(3)
    a = torch.multinomial(b.mu, 256, replacement=True, generator=torch.Generator().manual_seed(3))
    fast = mismatch.estimate(b, kind, 256, 2.0, gen)
    assert torch.allclose(fast.float(), _brute_estimate(b, kind, a, 2.0), atol=1e-6)


@pytest.mark.parametrize("kind, cap", [("none", 2.0), ("is", 2.0), ("tis", 2.0), ("tis", 5.0), ("mis", 2.0),
                                       ("mis", 1.2)])
def test_exact_bias_and_noise_match_a_sum_over_actions_in_float64(kind, cap):
    b = mismatch.seed_bandit()
    pi, mu, A = b.pi.double(), b.mu.double(), b.adv.double()
    V = pi.numel()
    true = sum(pi[a] * A[a] * (torch.eye(V, dtype=torch.float64)[a] - pi) for a in range(V))
    rho = pi / mu
    w = {"none": torch.ones_like(rho), "is": rho, "tis": rho.clamp(max=cap), "mis": rho * (rho <= cap)}[kind]
    xs = [w[a] * A[a] * (torch.eye(V, dtype=torch.float64)[a] - pi) for a in range(V)]
    mean = sum(mu[a] * xs[a] for a in range(V))
    var = sum(mu[a] * (xs[a] ** 2).sum() for a in range(V)) - (mean ** 2).sum()
    bias, noise = mismatch.exact_bias_noise(b, kind, cap, n=256)
    assert bias == pytest.approx(float((mean - true).norm() / true.norm()), abs=2e-5)
    assert noise == pytest.approx(float(var.sqrt() / 16 / true.norm()), rel=1e-4)


def test_importance_sampling_is_exactly_unbiased_and_tis_is_not():
    b = mismatch.seed_bandit()
    assert mismatch.exact_bias_noise(b, "is")[0] < 1e-5
    assert mismatch.exact_bias_noise(b, "tis", 2.0)[0] > 0.2


def _level_reference(L, p, q, cap, n):
    """Enumerate every one of the 2^L responses (small L) and weight each token by hand."""
    import itertools
    out = {}
    seqs = list(itertools.product([0, 1], repeat=L))
    prob = lambda y, z: math.prod(z if t else 1 - z for t in y)               # noqa: E731
    reward = lambda y: float(sum(y) >= L / 2)                                 # noqa: E731
    base = sum(prob(y, p) * reward(y) for y in seqs)
    truth = sum(prob(y, p) * (reward(y) - base) * sum(t - p for t in y) for y in seqs)
    tok = lambda t: (p / q) if t else (1 - p) / (1 - q)                       # noqa: E731
    est = {"no correction": lambda y: [1.0] * L,
           "token IS": lambda y: [tok(t) for t in y],
           "sequence IS": lambda y: [math.prod(tok(t) for t in y)] * L,
           f"sequence TIS (C={cap:g})": lambda y: [min(math.prod(tok(t) for t in y), cap)] * L}
    for name, wf in est.items():
        xs = [(reward(y) - base) * sum(w * (t - p) for w, t in zip(wf(y), y)) for y in seqs]
        m = sum(prob(y, q) * x for y, x in zip(seqs, xs))
        v = sum(prob(y, q) * x * x for y, x in zip(seqs, xs)) - m * m
        out[name] = (abs(m - truth) / abs(truth), math.sqrt(max(v, 0)) / math.sqrt(n) / abs(truth))
    return out


@pytest.mark.parametrize("L", [3, 6, 9])
def test_level_comparison_matches_enumeration_of_every_response(L):
    row = mismatch.level_comparison(L, p=0.55, q=0.4, cap=1.5, n=64)
    ref = _level_reference(L, 0.55, 0.4, 1.5, 64)
    for name, (bias, noise) in ref.items():
        assert row.bias[name] == pytest.approx(bias, abs=1e-9)
        assert row.noise[name] == pytest.approx(noise, rel=1e-9)


def test_sequence_weight_variance_explodes_and_token_weight_is_biased_at_long_lengths():
    short, long = mismatch.level_comparison(16), mismatch.level_comparison(1024)
    assert long.noise["sequence IS"] > 10 * long.noise["token IS"]
    assert long.bias["token IS"] > 10 * short.bias["token IS"]


def test_stale_sampler_with_no_lag_is_on_policy_and_bias_grows_with_lag():
    b = mismatch.seed_bandit()
    on = mismatch.stale_bandit(b, 0)
    assert torch.equal(on.pi, on.mu) and mismatch.exact_bias_noise(on, "none")[0] < 1e-6
    biases = [mismatch.exact_bias_noise(mismatch.stale_bandit(b, k), "none")[0] for k in (1, 4, 16)]
    assert biases[0] < biases[1] < biases[2]


def test_ratio_quantiles_match_sampling():
    b = mismatch.stale_bandit(mismatch.seed_bandit(), 16)
    q = mismatch.ratio_quantiles(b)
    a = torch.multinomial(b.mu, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    rho = (b.pi / b.mu)[a]
    assert float((rho > 2).float().mean()) == pytest.approx(q["above_cap_frac"], abs=3e-3)
    assert float(rho.median()) == pytest.approx(q["median"], rel=1e-3)


def test_weights_reject_an_unknown_kind_naming_it():
    o, r, m = mismatch.mismatched_batch(B=2, max_len=10)
    with pytest.raises(ValueError, match="kind"):
        mismatch.weights("clip", o, r, m)


def test_mismatched_batch_padding_is_nan_and_weights_ignore_it():
    o, r, m = mismatch.mismatched_batch(B=8, max_len=50)
    assert torch.isnan(o[~m]).all()
    for kind in mismatch.KINDS:
        w = mismatch.weights(kind, o, r, m, 2.0, "sequence")
        assert torch.isfinite(w).all() and (w[~m] == 0).all()


def test_mismatched_batch_has_mean_weight_one_per_token_and_per_response():
    """E_mu[rho] = 1 as for two normalised distributions, not exp(sigma^2/2) (mean log rho = 0)."""
    sigma, L = 0.3, 20
    o, r, m = mismatch.mismatched_batch(B=4000, max_len=L, sigma=sigma, seed=1)
    rho = (o - r).exp()[m]
    se = float(rho.std()) / len(rho) ** 0.5
    assert abs(float(rho.mean()) - 1) < 4 * se and math.exp(sigma ** 2 / 2) - 1 > 20 * se
    o, r, m = mismatch.mismatched_batch(B=8000, max_len=40, sigma=0.1, seed=2)
    log_seq = (o - r).where(m, torch.zeros(())).sum(1)      # [B] log of each response's ratio
    seq = log_seq.exp()
    se_seq = float(seq.std()) / len(seq) ** 0.5
    inflated = float((m.sum(1) * 0.1 ** 2 / 2).exp().mean())  # E[rho_seq] if mean log rho were 0
    assert abs(float(seq.mean()) - 1) < 4 * se_seq and inflated - 1 > 10 * se_seq
