"""course_lib.sim.aggregation (chapter 03): token and response weights of the four modes, against a
slow closed-form reference written here (plain Python, nothing from course_lib), and the seed's and
the RLHF book's printed figures."""
import math
import random

import pytest
import torch

from course_lib.sim import aggregation as sa

SEED_R = [1.0, 0.0, 0.0, 1.0]
SEED_L = [200, 50, 2000, 400]


def ref_adv(rewards):
    """GRPO advantage of one group: (R - mean) / (Bessel std + 1e-6); an all-equal group gets 0."""
    n = len(rewards)
    mean = sum(rewards) / n
    if all(r == rewards[0] for r in rewards):
        return [0.0] * n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
    return [(r - mean) / (std + 1e-6) for r in rewards]


def ref_alpha(lengths, mode, max_len):
    """Closed-form weight alpha of one token of each response (fact sheet §2)."""
    B, N = len(lengths), sum(lengths)
    L = max(lengths) if max_len is None else max_len
    return {"token-mean": [1 / N] * B,
            "seq-mean-token-mean": [1 / (B * n) for n in lengths],
            "seq-mean-token-sum": [1 / B] * B,
            "seq-mean-token-sum-norm": [1 / (B * L)] * B}[mode]


def ref_weights(rewards, lengths, mode, max_len=None):
    adv = ref_adv(rewards)
    alpha = ref_alpha(lengths, mode, max_len)
    per_token = [a * w for a, w in zip(adv, alpha)]
    return per_token, [p * n for p, n in zip(per_token, lengths)]


def test_seed_weight_table_to_the_printed_digit():
    seq = sa.response_weights(SEED_R, SEED_L, "seq-mean-token-mean")
    tok = sa.response_weights(SEED_R, SEED_L, "token-mean")
    assert [f"{a:+.2f}" for a in seq.adv.tolist()] == ["+0.87", "-0.87", "-0.87", "+0.87"]
    assert [f"{w:+.2e}" for w in seq.per_token.tolist()] == ["+1.08e-03", "-4.33e-03", "-1.08e-04", "+5.41e-04"]
    assert [f"{w:+.2e}" for w in tok.per_token.tolist()] == ["+3.27e-04"] + ["-3.27e-04"] * 2 + ["+3.27e-04"]
    assert [f"{w:+.3f}" for w in seq.whole.tolist()] == ["+0.217", "-0.217", "-0.217", "+0.217"]
    assert [f"{w:+.3f}" for w in tok.whole.tolist()] == ["+0.065", "-0.016", "-0.654", "+0.131"]


@pytest.mark.parametrize("mode", sa.MODES)
@pytest.mark.parametrize("max_len", [None, 4096])
def test_weights_match_the_closed_form_on_random_groups(mode, max_len):
    rng = random.Random(hash(mode) % 1000)
    for _ in range(20):
        G = rng.randint(2, 6)
        rewards = [rng.choice([0.0, 0.25, 0.5, 1.0]) for _ in range(G)]
        lengths = [rng.randint(1, 300) for _ in range(G)]
        w = sa.response_weights(rewards, lengths, mode, max_len)
        per_token, whole = ref_weights(rewards, lengths, mode, max_len)
        assert w.per_token.tolist() == pytest.approx(per_token, rel=1e-5, abs=1e-12)
        assert w.whole.tolist() == pytest.approx(whole, rel=1e-5, abs=1e-12)


def test_length_sweep_moves_only_the_chosen_response():
    sweep = [50, 500, 4000]
    per_tok, whole = sa.length_sweep(SEED_R, SEED_L, 2, sweep, "seq-mean-token-mean", 4096)
    for k, n in enumerate(sweep):
        lens = list(SEED_L)
        lens[2] = n
        p, w = ref_weights(SEED_R, lens, "seq-mean-token-mean", 4096)
        assert float(per_tok[k]) == pytest.approx(p[2], rel=1e-6)
        assert float(whole[k]) == pytest.approx(w[2], rel=1e-6)
    # the chapter's claim: seq-mean's per-token push at 4000 tokens is 1/80 of that at 50
    assert float(per_tok[0] / per_tok[-1]) == pytest.approx(80.0)


def test_rlhf_book_example():
    g = sa.rlhf_book_gradients()
    assert g["seq-mean-token-mean"] == pytest.approx((2 / 8, 2 / 14))
    assert g["seq-mean-token-sum-norm"] == pytest.approx((2 / 14, 2 / 14))
    assert g["token-mean"] == pytest.approx((2 / 11, 2 / 11))
    assert [f"{x:.4f}" for x in g["seq-mean-token-mean"]] == ["0.2500", "0.1429"]
    assert f"{g['token-mean'][0]:.4f}" == "0.1818"
    no_adv = sa.rlhf_book_gradients(include_advantage=False)
    assert f"{no_adv['token-mean'][0]:.4f}" == "0.0909"


@pytest.mark.parametrize("lengths, word", [([0, 3], "lengths"), ([[1, 2]], "lengths"), ([1.5, 2.0], "lengths")])
def test_length_mask_rejects_bad_lengths(lengths, word):
    with pytest.raises(ValueError, match=word):
        sa.length_mask(torch.tensor(lengths))


def test_response_weights_rejects_mismatched_inputs_and_unknown_modes():
    with pytest.raises(ValueError, match="same length"):
        sa.response_weights([1.0, 0.0, 1.0], [10, 20], "token-mean")
    with pytest.raises(ValueError, match="mode"):
        sa.response_weights([1.0, 0.0], [10, 20], "mean")
    with pytest.raises(ValueError, match="width"):
        sa.length_mask([10, 20], width=5)


# ---- Adam and the constant factor: a pure-Python Adam on a closed-form softmax gradient ----------

def ref_policy_grad(weight, batch, alpha, kl_coef=0.0, kl_alpha=None):
    """d loss / d weight [V][D] of sum_bt alpha_b * (-A_b * logp_bt) (+ kl_coef * sum_bt kl_alpha_b *
    (logp_bt + log V)^2 / 2), with d logp_y / d W[v] = (1[v = y] - p_v) x, in plain Python."""
    V, D = len(weight), len(weight[0])
    grad = [[0.0] * D for _ in range(V)]
    feats, toks, mask, adv = (batch.features.tolist(), batch.tokens.tolist(), batch.mask.tolist(),
                              batch.adv.tolist())
    for b in range(len(mask)):
        for t in range(len(mask[b])):
            if not mask[b][t]:
                continue
            x = feats[b][t]
            logits = [sum(weight[v][d] * x[d] for d in range(D)) for v in range(V)]
            top = max(logits)
            z = sum(math.exp(l - top) for l in logits)
            p = [math.exp(l - top) / z for l in logits]
            y = toks[b][t]
            coef = -alpha[b] * adv[b]
            if kl_coef:
                coef += kl_coef * kl_alpha[b] * (math.log(p[y]) + math.log(V))
            for v in range(V):
                for d in range(D):
                    grad[v][d] += coef * ((v == y) - p[v]) * x[d]
    return grad


def ref_adam(weight, batches, mode, max_len, lr=1e-2, max_grad_norm=None, kl_coef=0.0, kl_mode=None,
             b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba, bias-corrected) with torch's clip rule coef = max / (norm + 1e-6) when the
    norm exceeds max; returns the flattened update of each step."""
    w = [row[:] for row in weight]
    V, D = len(w), len(w[0])
    m = [[0.0] * D for _ in range(V)]
    s = [[0.0] * D for _ in range(V)]
    updates = []
    for step, batch in enumerate(batches, start=1):
        lengths = batch.mask.sum(dim=1).tolist()
        alpha = ref_alpha(lengths, mode, max_len)
        kl_alpha = ref_alpha(lengths, kl_mode or mode, max_len)
        g = ref_policy_grad(w, batch, alpha, kl_coef, kl_alpha)
        norm = math.sqrt(sum(x * x for row in g for x in row))
        if max_grad_norm is not None and norm > max_grad_norm:
            g = [[x * max_grad_norm / (norm + 1e-6) for x in row] for row in g]
        upd = []
        for v in range(V):
            for d in range(D):
                m[v][d] = b1 * m[v][d] + (1 - b1) * g[v][d]
                s[v][d] = b2 * s[v][d] + (1 - b2) * g[v][d] ** 2
                mhat, shat = m[v][d] / (1 - b1 ** step), s[v][d] / (1 - b2 ** step)
                u = -lr * mhat / (math.sqrt(shat) + eps)
                w[v][d] += u
                upd.append(u)
        updates.append(upd)
    return updates


@pytest.mark.parametrize("mode", sa.ADAM_MODES + ("seq-mean-token-mean",))
@pytest.mark.parametrize("clip,kl", [(None, None), (1.0, None), (0.05, None), (None, "same"), (None, "token-mean")])
def test_adam_run_matches_a_pure_python_adam(mode, clip, kl):
    batches = sa.toy_batches(3, n_groups=1, max_len=9, seed=3)
    w0 = sa.toy_weight()
    kwargs = {} if kl is None else {"kl_coef": 0.3, "kl_agg": None if kl == "same" else kl}
    run = sa.adam_run(batches, mode, w0, max_len=12, max_grad_norm=clip, **kwargs)
    ref = ref_adam(w0.tolist(), batches, mode, 12, max_grad_norm=clip, kl_coef=kwargs.get("kl_coef", 0.0),
                   kl_mode=kwargs.get("kl_agg"))
    assert torch.allclose(run.updates, torch.tensor(ref, dtype=torch.float64), rtol=1e-9, atol=1e-14)
    if clip is not None:
        assert run.clipped.tolist() == [n > clip for n in run.grad_norms.tolist()]


def test_a_constant_factor_cancels_under_adam_and_clipping_undoes_it():
    rows = {r.setting: r for r in sa.adam_comparison(steps=4, big_groups=4)}
    assert rows["one step"].gap_sum < 1e-9 and rows["one step"].gap_token_mean < 1e-9
    assert rows["4 steps"].gap_sum < 1e-9                       # L_max is the same on every batch
    assert rows["4 steps"].gap_token_mean > 1e-4                # sum |y| is not
    clipped = rows["4 steps, max_grad_norm 1"]
    assert clipped.clipped == (0, 0, 4) and clipped.gap_sum > 1e-3
    assert rows["one step, KL x 0.05 by the same mode"].gap_sum < 1e-9
    assert rows["one step, KL x 0.05 by its own token mean"].gap_sum > 1e-2


def test_toy_batches_and_adam_run_name_bad_arguments():
    with pytest.raises(ValueError, match="group_size"):
        sa.toy_batches(1, group_size=1)
    with pytest.raises(ValueError, match="max_len"):
        sa.toy_batches(1, min_len=5, max_len=4)
    batches = sa.toy_batches(1)
    with pytest.raises(ValueError, match="max_grad_norm"):
        sa.adam_run(batches, "token-mean", sa.toy_weight(), max_len=64, max_grad_norm=0.0)
    with pytest.raises(ValueError, match="weight"):
        sa.adam_run(batches, "token-mean", None, max_len=64)
    with pytest.raises(ValueError, match="mode"):
        sa.adam_run(batches, "mean", sa.toy_weight(), max_len=64)
