"""Chapter 06's simulations: a sampler mu that differs from the trainer's pi, and what the
corrections (none, IS, TIS, MIS) do to a policy-gradient estimate.

The weights always come from ``corrections.tis_weights`` / ``mis_weights`` (IS is TIS with an
infinite cap), so the chapter measures the library's own functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..corrections import mis_weights, tis_weights

KINDS = ("none", "is", "tis", "mis")
KIND_LABELS = {"none": "no correction", "is": "importance sampling (pi/mu)",
               "tis": "TIS (truncate at C)", "mis": "MIS (drop above C)"}


@dataclass(frozen=True)
class Bandit:
    """A one-step policy over V actions: the trainer's pi, the sampler's mu, advantages A [V],
    and the exact policy gradient E_pi[A grad log pi] with respect to the logits [V]."""
    pi: Tensor
    mu: Tensor
    adv: Tensor
    true_grad: Tensor


def exact_gradient(pi: Tensor, adv: Tensor) -> Tensor:
    """E_{a~pi}[A(a) d log pi(a) / d logits] = sum_a pi_a A_a (e_a - pi)  -> [V]."""
    V = pi.numel()
    return ((pi * adv)[:, None] * (torch.eye(V) - pi[None, :])).sum(0)       # [V]


def seed_bandit(V: int = 200, seed: int = 0) -> Bandit:
    """The source chapter's setup: logits ~ 2 N(0, 1); the sampler adds 0.2 N(0, 1) noise to them
    and badly underestimates three tokens (ranks 6-8 by logit, -3 on their logits); A ~ N(0, 1).
    The draws happen in this order so the figures match the source to the last digit."""
    torch.manual_seed(seed)
    logits = torch.randn(V) * 2
    pi = logits.softmax(-1)
    noise = 0.2 * torch.randn(V)
    noise[logits.argsort()[-8:-5]] -= 3
    mu = (logits + noise).softmax(-1)
    adv = torch.randn(V)
    return Bandit(pi, mu, adv, exact_gradient(pi, adv))


def weights(kind: str, old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, cap: float = 2.0,
            level: str = "token") -> Tensor:
    """The correction weight [B, T] of one kind: 1 (none), rho (IS), min(rho, C), rho 1[rho <= C]."""
    if kind == "none":
        return mask.to(old_logp.dtype)
    if kind == "is":
        return tis_weights(old_logp, rollout_logp, mask, cap=math.inf, level=level)
    if kind == "tis":
        return tis_weights(old_logp, rollout_logp, mask, cap=cap, level=level)
    if kind == "mis":
        return mis_weights(old_logp, rollout_logp, mask, cap=cap, level=level)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def estimate(b: Bandit, kind: str, n: int = 256, cap: float = 2.0,
             gen: torch.Generator | None = None) -> Tensor:
    """One batch's gradient estimate [V]: n actions drawn from mu, each weighted by the correction."""
    V = b.pi.numel()
    a = torch.multinomial(b.mu, n, replacement=True, generator=gen)           # [n] sampler's draws
    old_logp, rollout_logp = b.pi.log()[a][:, None], b.mu.log()[a][:, None]  # [n, 1]: one token each
    w = weights(kind, old_logp, rollout_logp, torch.ones(n, 1, dtype=torch.bool), cap)[:, 0]   # [n]
    coef = w * b.adv[a]                                                      # [n]
    # mean_i coef_i (e_{a_i} - pi), without building the [n, V] matrix of scores
    return torch.bincount(a, weights=coef, minlength=V) / n - coef.mean() * b.pi   # [V]


def bias_and_noise(b: Bandit, kind: str, n_batches: int = 400, n: int = 256, cap: float = 2.0,
                   gen: torch.Generator | None = None) -> tuple[float, float]:
    """Relative bias |mean estimate - true| / |true| and relative single-batch noise
    mean |estimate - mean estimate| / |true|, over n_batches batches."""
    est = torch.stack([estimate(b, kind, n, cap, gen) for _ in range(n_batches)])   # [N, V]
    norm = b.true_grad.norm()
    bias = (est.mean(0) - b.true_grad).norm() / norm
    noise = (est - est.mean(0)).norm(dim=1).mean() / norm
    return float(bias), float(noise)


def seed_table(V: int = 200, seed: int = 0, n_batches: int = 400, n: int = 256, cap: float = 2.0,
               gen_seed: int = 1) -> dict[str, tuple[float, float]]:
    """The source chapter's table: {kind: (bias, noise)} for none, IS, TIS, MIS, in that order on
    one generator (the order matters for the last digit)."""
    b = seed_bandit(V, seed)
    gen = torch.Generator().manual_seed(gen_seed)
    return {kind: bias_and_noise(b, kind, n_batches, n, cap, gen) for kind in KINDS}


def exact_bias_noise(b: Bandit, kind: str, cap: float = 2.0, n: int = 256) -> tuple[float, float]:
    """The same two numbers without sampling: the estimator's exact relative bias, and its exact
    root-mean-square single-batch noise sqrt(E|estimate - mean|^2) / |true| for batches of n.

    Every action's contribution x_a = w_a A_a (e_a - pi) is known, so the mean is sum_a mu_a x_a and
    the per-sample variance sum_a mu_a |x_a|^2 - |mean|^2.
    """
    V = b.pi.numel()
    all_actions = torch.ones(V, 1, dtype=torch.bool)
    w = weights(kind, b.pi.log()[:, None], b.mu.log()[:, None], all_actions, cap)[:, 0]   # [V]
    c = b.mu * w * b.adv                                                     # [V] mu_a w_a A_a
    mean = c - c.sum() * b.pi                                                # [V] sum_a mu_a x_a
    sq = (w * b.adv) ** 2 * (1 - 2 * b.pi + (b.pi ** 2).sum())               # [V] |x_a|^2
    var = (b.mu * sq).sum() - (mean ** 2).sum()
    norm = b.true_grad.norm()
    return float((mean - b.true_grad).norm() / norm), float(var.clamp_min(0).sqrt() / n ** 0.5 / norm)


def cap_sweep(b: Bandit, caps, n: int = 256) -> dict[str, list[tuple[float, float]]]:
    """Exact (bias, noise) of TIS and MIS at each cap C."""
    return {kind: [exact_bias_noise(b, kind, float(c), n) for c in caps] for kind in ("tis", "mis")}


# ---- token level vs sequence level, exactly, on responses of L independent binary tokens ----
@dataclass(frozen=True)
class LevelRow:
    L: int
    bias: dict          # {name: relative bias}
    noise: dict         # {name: relative noise of one batch of n responses}
    ess: dict           # {name: effective sample size / n, (sum w)^2 / (n sum w^2) in expectation}


def level_comparison(L: int, p: float = 0.5, q: float = 0.47, cap: float = 2.0,
                     n: int = 256) -> LevelRow:
    """Exact bias and noise of four gradient estimators for responses of L i.i.d. tokens in {0, 1}.

    The trainer's policy emits token 1 with probability p = sigmoid(theta), the sampler with q.
    Reward: 1 if at least half of the tokens are 1; A = reward - E_pi[reward]. The gradient with
    respect to theta of E_pi[R] is estimated from sampler draws by
        sum_t w_t A (y_t - p)
    with w_t = 1 (none), the token ratio rho_t (token IS), the product prod_t rho_t (sequence IS),
    or min(prod_t rho_t, C) (sequence TIS). Every response with k ones has the same estimate, so
    expectations are exact sums over k ~ Binomial(L, q) (or Binomial(L, p) for the truth).
    """
    k = torch.arange(L + 1, dtype=torch.float64)                             # [K] number of ones
    logpmf = lambda prob: (torch.lgamma(torch.tensor(L + 1.0, dtype=torch.float64))  # noqa: E731
                           - torch.lgamma(k + 1) - torch.lgamma(L - k + 1)
                           + k * math.log(prob) + (L - k) * math.log(1 - prob))
    pmf_pi, pmf_mu = logpmf(p).exp(), logpmf(q).exp()                        # [K]
    reward = (k >= L / 2).double()
    adv = reward - (pmf_pi * reward).sum()                                   # [K]
    truth = (pmf_pi * adv * (k - L * p)).sum()                               # d E_pi[R] / d theta

    # one row per k: the first k tokens are 1, the rest 0 (order does not change any weight)
    tok = torch.arange(L)[None, :] < k[:, None]                              # [K, L] bool
    f64 = lambda x: torch.tensor(x, dtype=torch.float64)                     # noqa: E731
    old_logp = torch.where(tok, f64(math.log(p)), f64(math.log(1 - p)))      # trainer
    rollout_logp = torch.where(tok, f64(math.log(q)), f64(math.log(1 - q)))  # sampler
    mask = torch.ones(L + 1, L, dtype=torch.bool)
    score = torch.where(tok, f64(1 - p), f64(-p))                            # [K, L] y_t - p
    w = {"no correction": mask.double(),
         "token IS": weights("is", old_logp, rollout_logp, mask, level="token"),
         "sequence IS": weights("is", old_logp, rollout_logp, mask, level="sequence"),
         f"sequence TIS (C={cap:g})": weights("tis", old_logp, rollout_logp, mask, cap, "sequence")}
    bias, noise, ess = {}, {}, {}
    for name, wt in w.items():
        x = adv * (wt * score).sum(-1)                                       # [K] per-response estimate
        mean = (pmf_mu * x).sum()
        var = (pmf_mu * x ** 2).sum() - mean ** 2
        bias[name] = float((mean - truth).abs() / truth.abs())
        noise[name] = float(var.clamp_min(0).sqrt() / math.sqrt(n) / truth.abs())
        w_seq = wt.mean(-1)                                                  # [K] a response's mean weight
        ess[name] = float((pmf_mu * w_seq).sum() ** 2 / (pmf_mu * w_seq ** 2).sum())
    return LevelRow(L, bias, noise, ess)


# ---- asynchronous RL: the sampler is k optimiser steps behind ----
def policy_path(b: Bandit, steps: int, lr: float = 0.5) -> list[Tensor]:
    """Logits of the trainer after 0..steps exact policy-gradient ascent steps from pi's logits."""
    logits = [b.pi.log()]
    for _ in range(steps):
        pi = logits[-1].softmax(-1)
        logits.append(logits[-1] + lr * exact_gradient(pi, b.adv))
    return logits


def stale_bandit(b: Bandit, lag: int, steps: int = 16, lr: float = 0.5) -> Bandit:
    """The trainer at step ``steps`` and a sampler still using the weights of step steps - lag."""
    path = policy_path(b, steps, lr)
    pi, mu = path[steps].softmax(-1), path[steps - lag].softmax(-1)
    return Bandit(pi, mu, b.adv, exact_gradient(pi, b.adv))


def ratio_quantiles(b: Bandit, cap: float = 2.0) -> dict[str, float]:
    """Exact quantiles of rho = pi / mu over tokens drawn from the sampler mu (what a trainer sees),
    and the share of those tokens with rho above ``cap``."""
    rho = (b.pi.log() - b.mu.log()).exp()                                    # [V]
    order = torch.argsort(rho)
    cdf = torch.cumsum(b.mu[order], 0)                                       # [V]
    q = lambda p: float(rho[order][int(torch.searchsorted(cdf, torch.tensor(p)).clamp(max=len(rho) - 1))])  # noqa: E731
    return {"p01": q(0.01), "median": q(0.5), "p99": q(0.99), "max": float(rho.max()),
            "above_cap_frac": float(b.mu[rho > cap].sum())}


# ---- a batch of responses whose sampler log-probs differ a little from the trainer's ----
def mismatched_batch(B: int = 64, max_len: int = 200, sigma: float = 0.05,
                     seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """(old_logp, rollout_logp, mask), each [B, max_len]: lengths uniform in [max_len/10, max_len],
    the sampler's token log-probs uniform in [-3, 0], the trainer's off by log rho ~ N(-sigma^2/2, sigma^2)
    per token. The shift makes E_mu[rho] = 1 for every token and every response, as it is for any two
    normalised distributions (sum_a mu(a) pi(a)/mu(a) = 1); with mean log rho = 0 the weights would
    average exp(sigma^2/2) per token, exp(L sigma^2/2) per response of L tokens. sigma is a chosen size,
    not a measured engine's. Padding holds garbage on purpose."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(max_len // 10, max_len + 1, (B,), generator=gen)          # [B]
    mask = torch.arange(max_len)[None, :] < lengths[:, None]                          # [B, T]
    rollout_logp = -3 * torch.rand(B, max_len, generator=gen)                         # [B, T]
    old_logp = rollout_logp + sigma * torch.randn(B, max_len, generator=gen) - sigma ** 2 / 2   # [B, T]
    junk = torch.full_like(old_logp, float("nan"))
    return torch.where(mask, old_logp, junk), torch.where(mask, rollout_logp, junk), mask
