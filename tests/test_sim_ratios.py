"""course_lib.sim.ratios (chapter 05): the source chapter's ratio-drift figures, and the shares of
tokens and responses each loss drops, against references written here from the formulas."""
import math

import pytest
import torch

import reference as ref
from course_lib import losses
from course_lib.sim import ratios as sr

# The source chapter's printed figures (seed 0, 512 responses), in its own formats.
SEED_OUTSIDE = ["0.0%", "0.0%", "0.0%", "24.0%", "24.1%", "24.1%"]
SEED_PRODUCT = [("5e-01", "2e+00"), ("2e-01", "6e+00"), ("2e-02", "6e+01"),
                ("2e-03", "5e+02"), ("9e-10", "1e+07"), ("3e-17", "5e+22")]
SEED_GEO = [("0.9932", "1.0057"), ("0.9983", "1.0018"), ("0.9990", "1.0010"),
            ("0.9392", "1.0639"), ("0.9794", "1.0164"), ("0.9905", "1.0132")]


@pytest.fixture(scope="module")
def drift():
    return sr.ratio_drift()


def _seed_reference():
    """The source chapter's code, line for line (global generator, sigma outer, L inner), plus the
    binding share computed from its definition with advantages +1, -1, +1, ..."""
    torch.manual_seed(0)
    out = []
    for sigma in (0.02, 0.2):
        for L in (100, 1000, 4000):
            log_r = torch.randn(512, L) * sigma
            r = log_r.exp()
            outside = ((r < 0.8) | (r > 1.28)).float().mean()
            pos = torch.tensor([i % 2 == 0 for i in range(512)])[:, None]
            binding = ((pos & (r > 1.28)) | (~pos & (r < 0.8))).float().mean()
            out.append((float(outside), float(binding), log_r.sum(1).exp(), log_r.mean(1).exp()))
    return out


def test_ratio_drift_reproduces_the_source_chapters_printed_figures(drift):
    assert [f"{r.outside:.1%}" for r in drift] == SEED_OUTSIDE
    assert [(f"{r.product_min:.0e}", f"{r.product_max:.0e}") for r in drift] == SEED_PRODUCT
    assert [(f"{r.geo_min:.4f}", f"{r.geo_max:.4f}") for r in drift] == SEED_GEO
    assert [(r.sigma, r.length) for r in drift] == [(s, L) for s in (0.02, 0.2) for L in (100, 1000, 4000)]


def test_ratio_drift_matches_the_source_code_and_the_binding_definition(drift):
    for row, (outside, binding, product, geo) in zip(drift, _seed_reference()):
        assert row.outside == pytest.approx(outside, abs=1e-7)
        assert row.binding == pytest.approx(binding, abs=1e-7)
        assert row.product_min == pytest.approx(float(product.min()), rel=1e-4)
        assert row.product_max == pytest.approx(float(product.max()), rel=1e-4)
        assert row.geo_min == pytest.approx(float(geo.min()), abs=1e-6)
        assert row.geo_max == pytest.approx(float(geo.max()), abs=1e-6)


def test_only_about_half_of_the_outside_tokens_lose_their_gradient(drift):
    assert [f"{r.binding:.1%}" for r in drift[3:]] == ["12.0%", "12.0%", "12.1%"]
    for r in drift[3:]:
        assert 0.45 < r.binding / r.outside < 0.55
    # analytic: P(log r > log 1.28)/2 + P(log r < log 0.8)/2 for log r ~ N(0, 0.2^2)
    phi = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))          # noqa: E731
    expected = 0.5 * (1 - phi(math.log(1.28) / 0.2)) + 0.5 * phi(math.log(0.8) / 0.2)
    assert drift[5].binding == pytest.approx(expected, abs=2e-3)


def test_the_product_spans_39_orders_of_magnitude_at_4000_tokens(drift):
    assert math.log10(drift[5].product_max / drift[5].product_min) > 39


def test_ratio_drift_does_not_touch_the_global_generator():
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    sr.ratio_drift(sigmas=(0.1,), lengths=(10,), n=4)
    assert torch.equal(torch.rand(3), a)


def _small_batch(sigma, seed=0):
    z, mask, adv = sr.simulated_batch(16, 5, 30, seed=seed)
    return sigma * z, torch.zeros_like(z), adv, mask


def _reference_token_dropped(logp, adv, mask, lo, hi):
    """Token-level clip: a token has no gradient iff A > 0 and r > hi, or A < 0 and r < lo."""
    dead = n = 0
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            if not mask[i, t]:
                continue
            n += 1
            r = math.exp(float(logp[i, t]))
            a = float(adv[i])
            dead += (a > 0 and r > hi) or (a < 0 and r < lo)
    return dead / n


def _reference_gspo_dropped(logp, adv, mask, lo, hi):
    """Sequence-level clip on s_i = exp(mean_t log r): (token share, response share) dropped."""
    dead_tok = dead_seq = n_tok = n_seq = 0
    for i in range(logp.shape[0]):
        vals = [float(logp[i, t]) for t in range(logp.shape[1]) if mask[i, t]]
        if not vals:
            continue
        s = math.exp(sum(vals) / len(vals))
        a = float(adv[i])
        dropped = (a > 0 and s > hi) or (a < 0 and s < lo)
        n_seq += 1
        n_tok += len(vals)
        dead_seq += dropped
        dead_tok += dropped * len(vals)
    return dead_tok / n_tok, dead_seq / n_seq


@pytest.mark.parametrize("sigma", [0.01, 0.1, 0.3])
def test_dropped_shares_agree_with_the_clip_definitions(sigma):
    logp, old_logp, adv, mask = _small_batch(sigma)
    tok, _ = sr.dropped_shares("dapo", logp, old_logp, adv, mask)
    assert tok == pytest.approx(_reference_token_dropped(logp, adv, mask, 0.8, 1.28), abs=1e-6)
    g_tok, g_seq = sr.dropped_shares("gspo", logp, old_logp, adv, mask)
    ref_tok, ref_seq = _reference_gspo_dropped(logp, adv, mask, 1 - 3e-4, 1 + 4e-4)
    assert (g_tok, g_seq) == (pytest.approx(ref_tok, abs=1e-6), pytest.approx(ref_seq, abs=1e-6))
    assert sr.dropped_shares("cispo", logp, old_logp, adv, mask) == (0.0, 0.0)


def test_gspo_drops_whole_responses_and_token_clipping_drops_single_tokens():
    logp, old_logp, adv, mask = _small_batch(0.2)
    g = sr.token_gradients("gspo", logp, old_logp, adv, mask)
    for i in range(mask.shape[0]):
        row = g[i][mask[i]]
        assert bool((row == 0).all()) or bool((row != 0).all())
        assert torch.allclose(row, row[0].expand_as(row))            # one coefficient per response
    d = sr.token_gradients("dapo", logp, old_logp, adv, mask)
    mixed = [bool((d[i][mask[i]] == 0).any() and (d[i][mask[i]] != 0).any()) for i in range(16)]
    assert any(mixed)


def test_clipping_vs_noise_rows_match_the_references_and_grow_with_noise():
    z, mask, adv = sr.simulated_batch(12, 5, 40, seed=1)
    sigmas = (0.003, 0.03, 0.3)
    rows = sr.clipping_vs_noise(sigmas, z, mask, adv)
    for row, sigma in zip(rows, sigmas):
        logp = sigma * z
        assert row.sigma == sigma
        assert row.token_dropped == pytest.approx(
            _reference_token_dropped(logp, adv, mask, 0.8, 1.28), abs=1e-6)
        ref_tok, ref_seq = _reference_gspo_dropped(logp, adv, mask, 1 - 3e-4, 1 + 4e-4)
        assert row.gspo_seq_dropped == pytest.approx(ref_seq, abs=1e-6)
        assert row.gspo_tok_dropped == pytest.approx(ref_tok, abs=1e-6)
        assert row.cispo_dropped == 0.0
        assert row.token_dropped <= row.token_outside
    assert rows[0].token_outside == 0.0 and rows[-1].token_outside > 0.2


def test_simulated_batch_lengths_and_advantages():
    z, mask, adv = sr.simulated_batch(6, 3, 9, seed=2)
    assert z.shape == mask.shape == (6, 9) and mask.dtype == torch.bool
    lengths = mask.sum(1)
    assert bool(((lengths >= 3) & (lengths <= 9)).all())
    assert bool((mask[:, :3]).all())                                    # contiguous from the start
    assert adv.tolist() == [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]


@pytest.mark.parametrize("kw", [dict(min_len=0, max_len=5), dict(min_len=6, max_len=5)])
def test_simulated_batch_rejects_bad_lengths(kw):
    with pytest.raises(ValueError, match="min_len"):
        sr.simulated_batch(4, **kw)


def _bisect_half_weight(weight, a, b, keep, steps=200):
    """The r between a and b where weight(r) crosses keep, by bisection (weight(a) > keep > weight(b))."""
    for _ in range(steps):
        m = 0.5 * (a + b)
        a, b = (m, b) if weight(m) > keep else (a, m)
    return 0.5 * (a + b)


@pytest.mark.parametrize("tau_pos,tau_neg,keep", [(1.0, 1.05, 0.5), (8.0, 10.0, 0.5), (2.0, 3.0, 0.9)])
def test_kept_gradient_ranges_match_a_bisection_of_the_reference_coefficients(tau_pos, tau_neg, keep):
    rows = {(k.rule.split()[0], k.sign): k for k in sr.kept_gradient_ranges(0.2, 0.28, tau_pos, tau_neg, keep)}
    for sign, tau in ((1, tau_pos), (-1, tau_neg)):
        w = lambda r: ref.sapo_coefficient(r, float(sign), tau_pos, tau_neg) / (r * sign)
        hi = _bisect_half_weight(w, 1.0, 1.0 + 100.0, keep)
        assert rows["SAPO", sign].hi == pytest.approx(hi, abs=1e-12)
        lo = 0.0 if w(1e-300) > keep else _bisect_half_weight(w, 1.0, 1e-300, keep)
        assert rows["SAPO", sign].lo == pytest.approx(lo, abs=1e-12)
    # the clip: full gradient on one side of its bound, none past it (the reference's case table)
    grid = [i / 1000 for i in range(1, 5001)]
    kept_pos = [r for r in grid if ref.ppo_coefficient(r, 1.0, 0.2, 0.28) / r > keep]
    kept_neg = [r for r in grid if ref.ppo_coefficient(r, -1.0, 0.2, 0.28) / -r > keep]
    assert max(kept_pos) == rows["clip", 1].hi == 1.28 and rows["clip", 1].lo == 0.0
    assert min(kept_neg) == rows["clip", -1].lo == 0.8 and rows["clip", -1].hi == math.inf


def test_sapo_half_width_is_where_the_real_losss_gradient_weight_is_one_half():
    for A, tau in ((1.0, 1.0), (-1.0, 1.05)):
        r = 1.0 + sr.sapo_half_width(tau)
        kw = dict(tau_pos=tau, tau_neg=tau)
        c = losses.grad_coefficient("sapo", torch.tensor([r], dtype=torch.float64), A, **kw)
        assert float(c[0]) / (r * A) == pytest.approx(0.5, abs=1e-12)
    assert sr.sapo_weight_at_zero(1.05) == pytest.approx(
        ref.sapo_coefficient(1e-12, -1.0, 1.0, 1.05) / -1e-12, rel=1e-9)


@pytest.mark.parametrize("kw", [dict(tau=0.0), dict(tau=-1.0), dict(tau=1.0, keep=1.0), dict(tau=1.0, keep=0.0)])
def test_sapo_half_width_rejects_bad_arguments(kw):
    with pytest.raises((ValueError, TypeError), match="tau|keep"):
        sr.sapo_half_width(**kw)
