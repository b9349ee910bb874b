"""Slow, obviously-correct references for the unit tests of course_lib.

Every function here works on plain Python floats and nested lists (call ``.tolist()`` on a
tensor first) and loops over rows and tokens, one formula per line, straight from the fact
sheet (shared/reference/algorithms.md). No vectorisation, no torch: if a reference and the
library agree, they agree for two independent reasons.

Conventions: ``mask[b][t]`` is True on response tokens; ``adv`` is a list of B floats (one per
sequence) or a B x T nested list (one per token). Gradients are returned in closed form as the
derivative of the *minimised* loss with respect to ``logp[b][t]`` (0 on padding).
"""
from __future__ import annotations

import itertools
import math

LOG_RATIO_CLAMP = 20.0


def _clamp(x, lo, hi):
    return min(max(x, lo), hi)


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def _adv_at(adv, b, t):
    """The advantage of token t of row b, whether adv is per sequence or per token."""
    return adv[b][t] if isinstance(adv[b], list) else adv[b]


# --------------------------------------------------------------------------------------------
# masked reductions
# --------------------------------------------------------------------------------------------

def masked_sum(x, mask):
    total = 0.0
    for b in range(len(mask)):
        for t in range(len(mask[b])):
            if mask[b][t]:
                total += x[b][t]
    return total


def masked_row_sums(x, mask):
    sums = []
    for b in range(len(mask)):
        s = 0.0
        for t in range(len(mask[b])):
            if mask[b][t]:
                s += x[b][t]
        sums.append(s)
    return sums


def masked_mean(x, mask):
    """Mean over valid tokens; 0 when there are none."""
    n = sum(1 for row in mask for m in row if m)
    return masked_sum(x, mask) / n if n else 0.0


def masked_row_means(x, mask):
    out = []
    for b in range(len(mask)):
        n = sum(1 for m in mask[b] if m)
        out.append(masked_row_sums([x[b]], [mask[b]])[0] / n if n else 0.0)
    return out


# --------------------------------------------------------------------------------------------
# advantages (fact sheet §3)
# --------------------------------------------------------------------------------------------

def group_advantages(rewards, group_size, scale=True, eps=1e-6):
    """GRPO: (R - mean) / (Bessel std + eps) per contiguous group; an all-equal group gets 0."""
    out = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start:start + group_size]
        if all(r == group[0] for r in group):
            out.extend([0.0] * group_size)
            continue
        mean = sum(group) / group_size
        if not scale:                                   # Dr. GRPO: no std
            out.extend([r - mean for r in group])
            continue
        var = sum((r - mean) ** 2 for r in group) / (group_size - 1)   # Bessel
        std = math.sqrt(var)
        out.extend([(r - mean) / (std + eps) for r in group])
    return out


def batch_std_advantages(rewards, group_size, eps=1e-6):
    """The group's mean subtracted, the whole batch's Bessel std dividing; an all-equal group gets 0."""
    mean_all = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean_all) ** 2 for r in rewards) / (len(rewards) - 1))
    out = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start:start + group_size]
        if all(r == group[0] for r in group):
            out.extend([0.0] * group_size)
            continue
        mean = sum(group) / group_size
        out.extend([(r - mean) / (std + eps) for r in group])
    return out


def dr_grpo_advantages(rewards, group_size):
    return group_advantages(rewards, group_size, scale=False)


def rloo_advantages(rewards, group_size):
    """Each reward minus the mean of the other G-1 rewards of its group."""
    out = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start:start + group_size]
        for i in range(group_size):
            others = [group[j] for j in range(group_size) if j != i]
            out.append(group[i] - sum(others) / len(others))
    return out


def signal_groups(rewards, group_size):
    """True for a group whose rewards are not all equal."""
    out = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start:start + group_size]
        out.append(any(r != group[0] for r in group))
    return out


def signal_probability(pass_rate, group_size):
    """P(not all equal) for G independent Bernoulli(p) rewards, by enumerating all 2^G outcomes."""
    total = 0.0
    for outcome in itertools.product((0, 1), repeat=group_size):
        if all(o == outcome[0] for o in outcome):
            continue
        prob = 1.0
        for o in outcome:
            prob *= pass_rate if o else 1 - pass_rate
        total += prob
    return total


def gae(rewards, values, mask, gamma, lam):
    """A_t = sum_l (gamma lam)^l delta_{t+l} over the valid tokens of each row, in order.

    The valid tokens of a row are taken out of the padding first; after the last one, V = 0 and
    nothing follows (EOS reset). Advantages and returns are 0 on padding.
    """
    B, T = len(mask), len(mask[0])
    adv = [[0.0] * T for _ in range(B)]
    ret = [[0.0] * T for _ in range(B)]
    for b in range(B):
        steps = [t for t in range(T) if mask[b][t]]
        deltas = []
        for k, t in enumerate(steps):
            next_value = values[b][steps[k + 1]] if k + 1 < len(steps) else 0.0
            deltas.append(rewards[b][t] + gamma * next_value - values[b][t])
        for k, t in enumerate(steps):
            a = 0.0
            for l in range(len(steps) - k):
                a += (gamma * lam) ** l * deltas[k + l]
            adv[b][t] = a
            ret[b][t] = a + values[b][t]
    return adv, ret


# --------------------------------------------------------------------------------------------
# reward shaping (fact sheet §4.4, DAPO Eq. 13)
# --------------------------------------------------------------------------------------------

def overlong_penalty(length, max_len, cache_len):
    if length <= max_len - cache_len:
        return 0.0
    if length <= max_len:
        return ((max_len - cache_len) - length) / cache_len
    return -1.0


# --------------------------------------------------------------------------------------------
# aggregation (fact sheet §2)
# --------------------------------------------------------------------------------------------

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def contains_sum(prompt_text, response_text):
    """The lenient verifier on strings: "07+35=", "5242<eos>.." -> 1.0 (the sum's digits appear
    before the first <eos>; a response without <eos> is read whole)."""
    a, b = int(prompt_text[:2]), int(prompt_text[3:5])
    body = response_text.split("<eos>")[0].replace(".", "")
    return float(str(a + b) in body)


def aggregate(loss_tok, mask, mode, max_len=None):
    """The four modes, each written as its formula. B counts non-empty rows (at least 1)."""
    T = len(mask[0])
    rows = []                                           # valid token losses of non-empty rows
    for b in range(len(mask)):
        row = [loss_tok[b][t] for t in range(T) if mask[b][t]]
        if row:
            rows.append(row)
    n_seqs = max(len(rows), 1)
    if mode == "token-mean":
        n_tokens = sum(len(row) for row in rows)
        return sum(sum(row) for row in rows) / n_tokens if n_tokens else 0.0
    if mode == "seq-mean-token-mean":
        return sum(sum(row) / len(row) for row in rows) / n_seqs
    if mode == "seq-mean-token-sum":
        return sum(sum(row) for row in rows) / n_seqs
    if mode == "seq-mean-token-sum-norm":
        L = T if max_len is None else max_len
        return sum(sum(row) / L for row in rows) / n_seqs
    if mode == "token-sum":
        return sum(sum(row) for row in rows)
    raise KeyError(mode)


def token_weights(mask, mode, max_len=None):
    """alpha[b][t] from the table of fact sheet §2; 0 on padding."""
    B, T = len(mask), len(mask[0])
    lengths = [sum(1 for m in mask[b] if m) for b in range(B)]
    n_seqs = max(sum(1 for n in lengths if n > 0), 1)
    n_tokens = sum(lengths)
    L = T if max_len is None else max_len
    alpha = [[0.0] * T for _ in range(B)]
    for b in range(B):
        for t in range(T):
            if not mask[b][t]:
                continue
            if mode == "token-mean":
                alpha[b][t] = 1.0 / n_tokens
            elif mode == "seq-mean-token-mean":
                alpha[b][t] = 1.0 / (n_seqs * lengths[b])
            elif mode == "seq-mean-token-sum":
                alpha[b][t] = 1.0 / n_seqs
            elif mode == "seq-mean-token-sum-norm":
                alpha[b][t] = 1.0 / (n_seqs * L)
            elif mode == "token-sum":
                alpha[b][t] = 1.0
            else:
                raise KeyError(mode)
    return alpha


# --------------------------------------------------------------------------------------------
# KL (fact sheet §5)
# --------------------------------------------------------------------------------------------

def kl_token(kind, logp, ref_logp):
    """k1 / k2 / k3 of one token, log_r = ref_logp - logp clamped to +-20."""
    log_r = _clamp(ref_logp - logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    r = math.exp(log_r)
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r ** 2
    if kind == "k3":
        return (r - 1.0) - log_r
    raise KeyError(kind)


def kl_token_grad(kind, logp, ref_logp):
    """d k / d logp with ref_logp fixed: k1 -> 1, k2 -> logp - ref_logp, k3 -> 1 - pi_ref / pi."""
    log_r = ref_logp - logp
    if abs(log_r) > LOG_RATIO_CLAMP:
        return 0.0                                      # the clamp is flat there
    if kind == "k1":
        return 1.0
    if kind == "k2":
        return -log_r
    if kind == "k3":
        return 1.0 - math.exp(log_r)
    raise KeyError(kind)


def kl_tokens(kind, logp, ref_logp, mask=None):
    """Per-token estimator values [B][T]; 0 on padding when a mask is given."""
    out = []
    for b in range(len(logp)):
        row = []
        for t in range(len(logp[b])):
            if mask is not None and not mask[b][t]:
                row.append(0.0)
            else:
                row.append(kl_token(kind, logp[b][t], ref_logp[b][t]))
        out.append(row)
    return out


def categorical_kl(logp_p, logp_q):
    """KL(p || q) = sum_x p(x) (log p(x) - log q(x)) for one distribution (lists over x)."""
    total = 0.0
    for lp, lq in zip(logp_p, logp_q):
        total += math.exp(lp) * (lp - lq)
    return total


def adaptive_kl_update(beta, current_kl, target_kl, n_steps, horizon):
    """Ziegler et al.: e = clip(KL/target - 1, -0.2, 0.2); beta * (1 + e n_steps / horizon)."""
    error = current_kl / target_kl - 1.0
    if error > 0.2:
        error = 0.2
    if error < -0.2:
        error = -0.2
    return beta * (1.0 + error * n_steps / horizon)


# --------------------------------------------------------------------------------------------
# ratios and clipping (fact sheet §4.1)
# --------------------------------------------------------------------------------------------

def log_ratio(logp, old_logp, mask):
    out = []
    for b in range(len(mask)):
        row = []
        for t in range(len(mask[b])):
            if mask[b][t]:
                row.append(_clamp(logp[b][t] - old_logp[b][t], -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
            else:
                row.append(0.0)
        out.append(row)
    return out


def clip_range(eps_low, eps_high):
    lo = 0.0 if eps_low is None else 1.0 - eps_low
    hi = math.inf if eps_high is None else 1.0 + eps_high
    return lo, hi


def ppo_token_loss(r, A, eps_low, eps_high, dual_clip=None):
    """-min(r A, clip(r) A), then for A < 0 and a dual clip c: capped at -c A."""
    lo, hi = clip_range(eps_low, eps_high)
    loss = -min(r * A, _clamp(r, lo, hi) * A)
    if dual_clip is not None and A < 0:
        loss = min(loss, -A * dual_clip)
    return loss


def ppo_coefficient(r, A, eps_low, eps_high, dual_clip=None):
    """c(r, A) of PPO by the case table of fact sheet §4.1 (not by differentiating)."""
    lo, hi = clip_range(eps_low, eps_high)
    if A > 0:
        return r * A if r <= hi else 0.0
    if A < 0:
        if r < lo:
            return 0.0
        if dual_clip is not None and r > dual_clip:
            return 0.0
        return r * A
    return 0.0


def clip_stats(ratio, adv_tok, mask, eps_low, eps_high):
    lo, hi = clip_range(eps_low, eps_high)
    n = low = high = outside = 0
    total, r_max = 0.0, -math.inf
    for b in range(len(mask)):
        for t in range(len(mask[b])):
            if not mask[b][t]:
                continue
            r, A = ratio[b][t], adv_tok[b][t]
            n += 1
            total += r
            r_max = max(r_max, r)
            low += (r < lo and A < 0)
            high += (r > hi and A > 0)
            outside += (r < lo or r > hi)
    if n == 0:
        return {"clip/low_frac": 0.0, "clip/high_frac": 0.0, "ratio/outside_frac": 0.0,
                "ratio/mean": 0.0, "ratio/max": 0.0}
    return {"clip/low_frac": low / n, "clip/high_frac": high / n, "ratio/outside_frac": outside / n,
            "ratio/mean": total / n, "ratio/max": r_max}


# --------------------------------------------------------------------------------------------
# per-token terms of the policy losses: (loss, c) with d loss / d logp = -c
# --------------------------------------------------------------------------------------------

def cispo_token(r, A, logp, eps_low, eps_high):
    """-sg(clip(r)) A log pi; its gradient coefficient is clip(r) A (the weight is detached)."""
    lo, hi = clip_range(eps_low, eps_high)
    w = _clamp(r, lo, hi)
    return -w * A * logp, w * A


def sapo_gate(r, tau):
    return _sigmoid(tau * (r - 1.0)) * 4.0 / tau


def sapo_coefficient(r, A, tau_pos, tau_neg):
    """c = f'(r) r A = 4 sigma (1 - sigma) r A with tau = tau_pos if A > 0 else tau_neg."""
    tau = tau_pos if A > 0 else tau_neg
    s = _sigmoid(tau * (r - 1.0))
    return 4.0 * s * (1.0 - s) * r * A


def sapo_token(r, A, tau_pos, tau_neg):
    tau = tau_pos if A > 0 else tau_neg
    return -sapo_gate(r, tau) * A, sapo_coefficient(r, A, tau_pos, tau_neg)


DEFAULTS = {                       # the knobs of each registered loss, from the fact sheet
    "ppo": dict(eps_low=0.2, eps_high=0.2, dual_clip=None, agg="token-mean"),
    "grpo": dict(eps_low=0.2, eps_high=0.2, dual_clip=None, agg="seq-mean-token-mean"),
    "dapo": dict(eps_low=0.2, eps_high=0.28, dual_clip=None, agg="token-mean"),
    "dr_grpo": dict(eps_low=0.2, eps_high=0.2, dual_clip=None, agg="seq-mean-token-sum-norm"),
    "gspo": dict(eps_low=3e-4, eps_high=4e-4, agg="seq-mean-token-mean"),
    "cispo": dict(eps_low=None, eps_high=0.28, agg="token-mean"),
    "sapo": dict(tau_pos=1.0, tau_neg=1.05, agg="seq-mean-token-mean"),
}


def policy_loss(name, logp, old_logp, adv, mask, *, agg=None, max_len=None, is_weight=None,
                **knobs):
    """(loss value, d loss / d logp [B][T]) of a registered loss, by loops and closed forms.

    Value: the per-token loss of the algorithm, times the IS weight, aggregated by ``aggregate``.
    Gradient: -alpha * w * c per token (fact sheet §1), alpha from ``token_weights``.
    """
    opts = {**DEFAULTS[name], **knobs}
    agg = opts.pop("agg") if agg is None else agg
    opts.pop("agg", None)
    if name == "gspo":
        return gspo_loss(logp, old_logp, adv, mask, agg=agg, max_len=max_len,
                         is_weight=is_weight, **opts)
    B, T = len(mask), len(mask[0])
    lr = log_ratio(logp, old_logp, mask)
    loss_tok = [[0.0] * T for _ in range(B)]
    coef = [[0.0] * T for _ in range(B)]
    for b in range(B):
        for t in range(T):
            if not mask[b][t]:
                continue
            r, A = math.exp(lr[b][t]), _adv_at(adv, b, t)
            w = 1.0 if is_weight is None else is_weight[b][t]
            if name in ("ppo", "grpo", "dapo", "dr_grpo"):
                loss = ppo_token_loss(r, A, opts["eps_low"], opts["eps_high"], opts["dual_clip"])
                c = ppo_coefficient(r, A, opts["eps_low"], opts["eps_high"], opts["dual_clip"])
            elif name == "cispo":
                loss, c = cispo_token(r, A, logp[b][t], opts["eps_low"], opts["eps_high"])
            elif name == "sapo":
                loss, c = sapo_token(r, A, opts["tau_pos"], opts["tau_neg"])
            else:
                raise KeyError(name)
            if abs(logp[b][t] - old_logp[b][t]) > LOG_RATIO_CLAMP and name != "cispo":
                c = 0.0                                 # the log-ratio clamp is flat there
            loss_tok[b][t] = loss * w
            coef[b][t] = c * w
    value = aggregate(loss_tok, mask, agg, max_len)
    alpha = token_weights(mask, agg, max_len)
    grad = [[-alpha[b][t] * coef[b][t] for t in range(T)] for b in range(B)]
    return value, grad


def gspo_sequence_ratio(logp_row, old_logp_row, mask_row):
    """s_i = exp(mean over valid tokens of log r): the geometric mean of the token ratios."""
    logs = [_clamp(lp - lo, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
            for lp, lo, m in zip(logp_row, old_logp_row, mask_row) if m]
    return math.exp(sum(logs) / len(logs)) if logs else 1.0


def gspo_loss(logp, old_logp, adv, mask, *, eps_low, eps_high, agg, max_len=None, is_weight=None):
    """GSPO: every token of row i carries -min(s_i A_i, clip(s_i) A_i), aggregated by ``agg``.

    Gradient (fact sheet §4.5): each token of row i gets -(sum_t alpha_it w_it) * c_i / |y_i|,
    with c_i = s_i A_i unless the sequence is clipped on the wrong side (then 0).
    """
    B, T = len(mask), len(mask[0])
    lo, hi = 1.0 - eps_low, 1.0 + eps_high
    alpha = token_weights(mask, agg, max_len)
    loss_tok = [[0.0] * T for _ in range(B)]
    grad = [[0.0] * T for _ in range(B)]
    for b in range(B):
        n = sum(1 for m in mask[b] if m)
        if n == 0:
            continue
        s, A = gspo_sequence_ratio(logp[b], old_logp[b], mask[b]), adv[b]
        loss_seq = -min(s * A, _clamp(s, lo, hi) * A)
        clipped_wrong_side = (A > 0 and s > hi) or (A < 0 and s < lo)
        c = 0.0 if clipped_wrong_side else s * A
        weight_sum = 0.0
        for t in range(T):
            if mask[b][t]:
                w = 1.0 if is_weight is None else is_weight[b][t]
                loss_tok[b][t] = loss_seq * w
                weight_sum += alpha[b][t] * w
        for t in range(T):
            if mask[b][t]:
                grad[b][t] = -weight_sum * c / n
    return aggregate(loss_tok, mask, agg, max_len), grad


# --------------------------------------------------------------------------------------------
# train/inference mismatch (fact sheet §6)
# --------------------------------------------------------------------------------------------

def correction_weights(kind, old_logp, rollout_logp, mask, cap, level):
    """TIS: min(rho, cap); MIS: rho if rho <= cap else 0. level='sequence': rho = prod_t rho_t."""
    B, T = len(mask), len(mask[0])
    out = [[0.0] * T for _ in range(B)]
    for b in range(B):
        seq_log_rho = 0.0
        for t in range(T):
            if mask[b][t]:
                seq_log_rho += old_logp[b][t] - rollout_logp[b][t]
        for t in range(T):
            if not mask[b][t]:
                continue
            log_rho = seq_log_rho if level == "sequence" else old_logp[b][t] - rollout_logp[b][t]
            rho = math.exp(_clamp(log_rho, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
            if kind == "tis":
                out[b][t] = min(rho, cap)
            elif kind == "mis":
                out[b][t] = rho if rho <= cap else 0.0
            else:
                raise KeyError(kind)
    return out


# --------------------------------------------------------------------------------------------
# the other losses of verl 0.9.1 and TRL 1.16.0: (value, d loss / d logp) by loops
# --------------------------------------------------------------------------------------------

def _token_family(logp, old_logp, adv, mask, agg, max_len, is_weight, term):
    """Aggregate per-token (loss, c) pairs: value by ``aggregate``, gradient -alpha * w * c."""
    B, T = len(mask), len(mask[0])
    lr = log_ratio(logp, old_logp, mask)
    loss_tok = [[0.0] * T for _ in range(B)]
    coef = [[0.0] * T for _ in range(B)]
    for b in range(B):
        for t in range(T):
            if mask[b][t]:
                w = 1.0 if is_weight is None else is_weight[b][t]
                loss, c = term(b, t, lr[b][t], _adv_at(adv, b, t))
                loss_tok[b][t], coef[b][t] = loss * w, c * w
    alpha = token_weights(mask, agg, max_len)
    return aggregate(loss_tok, mask, agg, max_len), [[-alpha[b][t] * coef[b][t] for t in range(T)]
                                                     for b in range(B)]


def gpg_loss(logp, old_logp, adv, mask, *, agg="token-mean", max_len=None, is_weight=None):
    """-A log pi per token; c = A."""
    return _token_family(logp, old_logp, adv, mask, agg, max_len, is_weight,
                         lambda b, t, lr, A: (-A * logp[b][t], A))


def dppo_keeps(p, p_old, A, divergence, delta_low, delta_high):
    """Is the token inside DPPO's trust region? (p, p_old: probabilities of the sampled token)"""
    if divergence == "tv":
        return p - p_old <= delta_high if A > 0 else p - p_old >= -delta_low
    kl = p_old * math.log(p_old / p) + (1 - p_old) * math.log((1 - p_old + 1e-8) / (1 - p + 1e-8))
    if A > 0:
        return kl <= delta_high or p <= p_old
    return kl <= delta_low or p >= p_old


def dppo_loss(logp, old_logp, adv, mask, *, divergence, delta_low=0.2, delta_high=0.2, trunc=3.0,
              agg="token-mean", max_len=None, is_weight=None):
    """-min(r, trunc) A log pi on kept tokens (weight held constant); c = min(r, trunc) A."""
    def term(b, t, lr, A):
        keep = dppo_keeps(math.exp(logp[b][t]), math.exp(old_logp[b][t]), A, divergence, delta_low, delta_high)
        w = min(math.exp(lr), trunc) if keep else 0.0
        return -w * A * logp[b][t], w * A
    return _token_family(logp, old_logp, adv, mask, agg, max_len, is_weight, term)


def dro_loss(logp, old_logp, adv, mask, *, beta=1.0, agg="token-mean", max_len=None, is_weight=None):
    """-(A log pi - beta/2 lr^2); c = A - beta lr."""
    return _token_family(logp, old_logp, adv, mask, agg, max_len, is_weight,
                         lambda b, t, lr, A: (-(A * logp[b][t] - 0.5 * beta * lr * lr), A - beta * lr))


def centred_covariances(logp, adv, mask):
    """(A - mean A)(log pi - mean log pi) of every valid token, means over valid tokens: {(b, t): cov}."""
    cells = [(b, t) for b in range(len(mask)) for t in range(len(mask[b])) if mask[b][t]]
    a_mean = sum(_adv_at(adv, b, t) for b, t in cells) / len(cells)
    l_mean = sum(logp[b][t] for b, t in cells) / len(cells)
    return {(b, t): (_adv_at(adv, b, t) - a_mean) * (logp[b][t] - l_mean) for b, t in cells}


def clip_cov_candidates(logp, old_logp, adv, mask, eps_low, eps_high, cov_lb, cov_ub):
    """The tokens Clip-Cov may detach: valid, PPO's clip not binding, cov strictly in (lb, ub)."""
    lr = log_ratio(logp, old_logp, mask)
    lo, hi = clip_range(eps_low, eps_high)
    out = set()
    for (b, t), cov in centred_covariances(logp, adv, mask).items():
        r, A = math.exp(lr[b][t]), _adv_at(adv, b, t)
        binds = -A * _clamp(r, lo, hi) > -A * r
        if not binds and cov_lb < cov < cov_ub:
            out.add((b, t))
    return out


def clip_cov_loss(logp, old_logp, adv, mask, *, detached, eps_low=0.2, eps_high=0.2, agg="token-mean",
                  max_len=None, is_weight=None):
    """PPO's token loss and coefficient, 0 on the ``detached`` tokens."""
    def term(b, t, lr, A):
        if (b, t) in detached:
            return 0.0, 0.0
        r = math.exp(lr)
        return ppo_token_loss(r, A, eps_low, eps_high), ppo_coefficient(r, A, eps_low, eps_high)
    return _token_family(logp, old_logp, adv, mask, agg, max_len, is_weight, term)


def kl_cov_loss(logp, old_logp, adv, mask, *, kl_ratio=2e-4, kl_coef=0.1, agg="token-mean",
                max_len=None, is_weight=None):
    """-r A, plus kl_coef |lr| on the max(1, int(N kl_ratio)) tokens of largest covariance."""
    covs = centred_covariances(logp, adv, mask)
    ranked = sorted(covs, key=lambda cell: -covs[cell])
    pulled = set(ranked[:max(1, int(len(covs) * kl_ratio))])

    def term(b, t, lr, A):
        r = math.exp(lr)
        if (b, t) not in pulled:
            return -A * r, A * r
        sign = (lr > 0) - (lr < 0)
        return -A * r + kl_coef * abs(lr), A * r - kl_coef * sign
    return _token_family(logp, old_logp, adv, mask, agg, max_len, is_weight, term)


def _sequence_family(logp, old_logp, adv, mask, agg, max_len, is_weight, seq_term):
    """Every token of row b carries the row's loss; seq_term(b, lrs) -> (loss, [d loss / d lr_t])."""
    B, T = len(mask), len(mask[0])
    alpha = token_weights(mask, agg, max_len)
    lr = log_ratio(logp, old_logp, mask)
    loss_tok = [[0.0] * T for _ in range(B)]
    grad = [[0.0] * T for _ in range(B)]
    for b in range(B):
        cols = [t for t in range(T) if mask[b][t]]
        if not cols:
            continue
        loss_seq, dl = seq_term(b, [lr[b][t] for t in cols])
        weights = [1.0 if is_weight is None else is_weight[b][t] for t in cols]
        for t, w in zip(cols, weights):
            loss_tok[b][t] = loss_seq * w
        total = sum(alpha[b][t] * w for t, w in zip(cols, weights))
        for t, d in zip(cols, dl):
            grad[b][t] = total * d
    return aggregate(loss_tok, mask, agg, max_len), grad


def gmpo_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.2, agg="seq-mean-token-mean",
              max_len=None, is_weight=None):
    """-A exp(mean_t x_t), x_t = min(lr, clip(lr)) for A > 0, max(...) for A < 0 (0 for A = 0)."""
    def seq_term(b, lrs):
        A, n = adv[b], len(lrs)
        xs, moving = [], []
        for x in lrs:
            if A > 0:
                xs.append(min(x, eps_high))
                moving.append(x < eps_high)
            elif A < 0:
                xs.append(max(x, -eps_low))
                moving.append(x > -eps_low)
            else:
                xs.append(0.0)
                moving.append(False)
        s = math.exp(sum(xs) / n)
        return -A * s, [-A * s / n if m else 0.0 for m in moving]
    return _sequence_family(logp, old_logp, adv, mask, agg, max_len, is_weight, seq_term)


def vespo_loss(logp, old_logp, adv, mask, *, k_pos=2.0, lambda_pos=3.0, k_neg=3.0, lambda_neg=2.0,
               agg="token-mean", max_len=None, is_weight=None):
    """-phi(w) A log pi with log w = clamp(sum_t lr, log 1e-8, 20), phi held constant; c = phi A."""
    B, T = len(mask), len(mask[0])
    lr = log_ratio(logp, old_logp, mask)
    phi = []
    for b in range(B):
        log_w = _clamp(sum(lr[b][t] for t in range(T) if mask[b][t]), math.log(1e-8), 20.0)
        k, lam = (k_pos, lambda_pos) if adv[b] >= 0 else (k_neg, lambda_neg)
        phi.append(math.exp(lam) * math.exp(log_w) ** k * math.exp(-lam * math.exp(log_w)))
    return _token_family(logp, old_logp, adv, mask, agg, max_len, is_weight,
                         lambda b, t, _, A: (-phi[b] * A * logp[b][t], phi[b] * A))


# --------------------------------------------------------------------------------------------
# the other advantage estimators of verl 0.9.1, by loops
# --------------------------------------------------------------------------------------------

def whiten(values, mask, eps=1e-8):
    cells = [(b, t) for b in range(len(mask)) for t in range(len(mask[b])) if mask[b][t]]
    mean = sum(values[b][t] for b, t in cells) / len(cells)
    var = sum((values[b][t] - mean) ** 2 for b, t in cells) / (len(cells) - 1)
    out = [[0.0] * len(mask[0]) for _ in mask]
    for b, t in cells:
        out[b][t] = (values[b][t] - mean) / math.sqrt(var + eps)
    return out


def discounted_returns(rewards, mask, gamma):
    """G at each valid token: its reward plus gamma times the G of the next *valid* token."""
    out = [[0.0] * len(mask[0]) for _ in mask]
    for b in range(len(mask)):
        g = 0.0
        for t in reversed(range(len(mask[b]))):
            if mask[b][t]:
                g = rewards[b][t] + gamma * g
                out[b][t] = g
    return out


def reinforce_pp(rewards, mask, gamma):
    return whiten(discounted_returns(rewards, mask, gamma), mask)


def reinforce_pp_baseline(rewards, mask, group_size):
    centred = dr_grpo_advantages(rewards, group_size)
    return whiten([[centred[b]] * len(mask[0]) for b in range(len(mask))], mask)


def remax(rewards_tok, baseline, mask):
    g = discounted_returns(rewards_tok, mask, 1.0)
    return [[g[b][t] - baseline[b] if mask[b][t] else 0.0 for t in range(len(mask[b]))]
            for b in range(len(mask))]


def opo(rewards, group_size, lengths):
    out = []
    for start in range(0, len(rewards), group_size):
        r, n = rewards[start:start + group_size], lengths[start:start + group_size]
        base = sum(ri * ni for ri, ni in zip(r, n)) / max(sum(n), 1)
        out += [0.0 if len(set(r)) == 1 else ri - base for ri in r]
    return out


def passk(rewards, group_size, scale=True, eps=1e-6):
    out = []
    for start in range(0, len(rewards), group_size):
        r = rewards[start:start + group_size]
        best = r.index(max(r))
        second = sorted(r)[-2]
        mean = sum(r) / len(r)
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / (len(r) - 1))
        gap = (r[best] - second) / (std + eps) if scale else r[best] - second
        out += [gap if i == best else 0.0 for i in range(len(r))]
    return out


def gpg(rewards, group_size, f_norm=1.0):
    alpha = len(rewards) / max(sum(1 for x in rewards if x != 0), 1)
    return [alpha * a / f_norm for a in dr_grpo_advantages(rewards, group_size)]


def gdpo(components, group_size, mask, weights, scale=True, eps=1e-6):
    """components: B lists of K rewards."""
    K = len(components[0])
    total = [0.0] * len(components)
    for k in range(K):
        adv = group_advantages([c[k] for c in components], group_size, scale=scale, eps=eps)
        total = [x + weights[k] * a for x, a in zip(total, adv)]
    return whiten([[x] * len(mask[0]) for x in total], mask)


def optimal_token_baseline(rewards, mask, group_size, old_logp, sum_pi_sq, is_weight=None,
                           zero_tail=True, eps=1e-8, by_valid_index=False):
    """A = G - B per token; B at step k of a group = sum_i G_ik W_ik / (sum_i W_ik + eps) over the
    group's responses that have a step k, k the padded position or (by_valid_index) the k-th valid
    token; W_ik = sum of 1 - 2 pi + sum pi^2 (times the squared IS weight) up to that token."""
    B, T = len(mask), len(mask[0])
    G = discounted_returns(rewards, mask, 1.0)
    steps = []                                        # per row: (position, G, W) of each valid token
    for b in range(B):
        acc, row = 0.0, {}
        for t in range(T):
            if mask[b][t]:
                w = 1 - 2 * math.exp(old_logp[b][t]) + sum_pi_sq[b][t]
                if is_weight is not None:
                    w *= is_weight[b][t] ** 2
                acc += w
                k = len(row) if by_valid_index else t
                row[k] = (t, G[b][t], acc)
        steps.append(row)
    out = [[0.0] * T for _ in range(B)]
    for start in range(0, B, group_size):
        rows = list(range(start, start + group_size))
        lengths = [sum(1 for m in mask[b] if m) for b in rows]
        ranked = sorted(lengths)
        unique_longest = ranked[-1] > ranked[-2]
        for b in rows:
            for k, (t, g, _) in steps[b].items():
                num = sum(steps[i][k][1] * steps[i][k][2] for i in rows if k in steps[i])
                den = sum(steps[i][k][2] for i in rows if k in steps[i]) + eps
                base = num / den
                if zero_tail and unique_longest and lengths[b - start] == ranked[-1] and k >= ranked[-2]:
                    base = 0.0
                out[b][t] = g - base
    return out
