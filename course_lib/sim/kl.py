"""Chapter 04's experiments: the k1/k2/k3 estimators on a sampled vocabulary, their expected gradients
as losses by exact enumeration, the adaptive KL controller on a toy policy, and verl's clamps.

Every KL here is about a policy pi (the sampler) and a reference pi_ref. The estimators estimate the
reverse KL(pi || pi_ref) from tokens sampled from pi (``course_lib.kl``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .. import kl as kl_lib

KINDS = ("k1", "k2", "k3")


# --------------------------------------------------------------------------------------------
# the seed's experiment: one position, V tokens, many samples
# --------------------------------------------------------------------------------------------

def drifted_pair(V: int, drift: float, seed: int = 0, dtype=torch.float32,
                 draw_dtype=torch.float32) -> tuple[Tensor, Tensor]:
    """Probabilities (pi, pi_ref) [V] of a reference softmax(randn) and a policy whose logits add drift * randn.

    The seed's construction, draw for draw: manual_seed(seed), pi_ref = softmax(randn(V)),
    pi = softmax(log pi_ref + drift * randn(V)). drift = 0 gives pi == pi_ref. The draws are made
    in ``draw_dtype``: float32 is the seed's, whose vectorised normal draws differ in their last bits
    between CPUs (AVX2 / AVX-512 kernels vs plain ones); float64 draws are the same on every CPU.
    """
    if not isinstance(V, int) or isinstance(V, bool) or V < 2:
        raise ValueError(f"V must be an int >= 2, got {V!r}")
    if isinstance(drift, bool) or not isinstance(drift, (int, float)) or not drift >= 0:
        raise ValueError(f"drift must be a number >= 0, got {drift!r}")
    torch.manual_seed(seed)
    p_ref = torch.randn(V, dtype=draw_dtype).softmax(-1)
    p = (p_ref.log() + drift * torch.randn(V, dtype=draw_dtype)).softmax(-1)
    return p.to(dtype), p_ref.to(dtype)


@dataclass(frozen=True)
class EstimatorStats:
    """One estimator over the samples: mean, std (Bessel), share of negative values, and the standard
    error of each (the std's by the delta method: sqrt(Var[(k - mean)^2] / n) / (2 std))."""
    mean: float
    std: float
    negative: float
    mean_se: float
    std_se: float
    negative_se: float

    @classmethod
    def of(cls, k: Tensor) -> "EstimatorStats":
        """The statistics of samples k [n]."""
        n = k.numel()
        mean, std, neg = float(k.mean()), float(k.std()), float((k < 0).double().mean())
        dev2 = (k.double() - mean) ** 2                                      # [n]
        return cls(mean, std, neg, std / n ** 0.5, float(dev2.std()) / n ** 0.5 / (2 * std) if std > 0 else 0.0,
                   (neg * (1 - neg) / n) ** 0.5)


@dataclass(frozen=True)
class SampledKL:
    exact: float                         # KL(pi || pi_ref), summed over the vocabulary
    stats: dict                          # kind -> EstimatorStats
    log_r: Tensor                        # [n] log(pi_ref / pi) of the sampled tokens
    exact_k2: float = float("nan")       # E_pi[k2], summed over the vocabulary (E[k1] = E[k3] = exact)


def sampled_kl(V: int = 1000, drift: float = 0.3, n: int = 100_000, seed: int = 0,
               dtype=torch.float32) -> SampledKL:
    """The seed's experiment: n tokens drawn from pi (global generator, after ``drifted_pair``), each
    scored by k1/k2/k3.

    float32 (the default) is the seed's computation: on x86 CPUs whose ATen kernels are AVX2 or
    AVX-512 it prints the seed's figures; elsewhere its last float32 bits differ, a few of the n
    sampled tokens change, and the figures move within their standard errors. float64 draws and
    computes everything in float64: other numbers, the same ones on every CPU.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"n must be an int >= 2, got {n!r}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 (the seed's) or torch.float64, got {dtype!r}")
    p, p_ref = drifted_pair(V, drift, seed, dtype, draw_dtype=dtype)
    logp, ref_logp = p.log(), p_ref.log()
    exact = float(kl_lib.categorical_kl(logp, ref_logp))
    exact_k2 = float((p.double() * 0.5 * (logp.double() - ref_logp.double()) ** 2).sum())
    x = torch.multinomial(p, n, replacement=True)                           # [n] tokens sampled from pi
    tok_logp, tok_ref = logp[x][None, :], ref_logp[x][None, :]              # [1, n]
    stats = {}
    for kind in KINDS:
        k = kl_lib.kl_estimate(tok_logp, tok_ref, kind=kind)[0]             # [n]
        stats[kind] = EstimatorStats.of(k)
    return SampledKL(exact, stats, (tok_ref - tok_logp)[0], exact_k2)


# --------------------------------------------------------------------------------------------
# expected gradient of each estimator used as a loss, by exact enumeration
# --------------------------------------------------------------------------------------------

def expected_loss_gradients(V: int = 50, drift: float = 0.3, seed: int = 0) -> dict[str, Tensor]:
    """Gradients [V] with respect to the policy's logits, in float64, summed exactly over all V tokens,
    for the seed's drifted pair (``estimator_gradients`` on one position)."""
    p, p_ref = drifted_pair(V, drift, seed, torch.float64)
    ref_logp = (p_ref / p_ref.sum()).log()                                  # renormalised in float64
    return {k: g[0] for k, g in estimator_gradients(p.log()[None], ref_logp[None]).items()}


def estimator_gradients(logits: Tensor, ref_logp: Tensor) -> dict[str, Tensor]:
    """Expected gradients [N, V] with respect to the policy's logits [N, V] at N positions, summed
    exactly over the vocabulary (no sampling); ``ref_logp`` [N, V] is pi_ref's log-softmax.

    "k1" / "k2" / "k3": E_{x~pi}[grad k(x)], the estimator differentiated with the token x held fixed
    (what a per-token KL loss does); "k1 in reward": E_{x~pi}[k1(x) grad log pi(x)], k1 detached and
    used as a (negative) reward through the score function; "reverse": grad KL(pi || pi_ref);
    "forward": grad KL(pi_ref || pi). Chapter 04 applies it to one synthetic position, chapter 12 to
    real ones.
    """
    theta = logits.detach().clone().requires_grad_(True)                     # [N, V]

    def grad(f):
        (g,) = torch.autograd.grad(f(theta.log_softmax(-1)), theta)
        return g

    out = {}
    for kind in KINDS:                                                      # token x: weight pi(x), not differentiated
        out[kind] = grad(lambda logp: (logp.exp().detach() * kl_lib.kl_estimate(logp, ref_logp, kind=kind)).sum())
    out["k1 in reward"] = grad(lambda logp: (logp.exp().detach() * (logp - ref_logp).detach() * logp).sum())
    out["reverse"] = grad(lambda logp: kl_lib.categorical_kl(logp, ref_logp).sum())
    out["forward"] = grad(lambda logp: kl_lib.categorical_kl(ref_logp, logp).sum())
    return out


def framework_kl_gradients(logits: Tensor, ref_logp: Tensor) -> dict[str, Tensor]:
    """Expected gradients [N, V] of two frameworks' KL losses that are not a bare estimator, summed
    exactly over the vocabulary like ``estimator_gradients`` (the token x weighted by pi(x), not
    differentiated), on-policy (pi_old = pi).

    "k3+": verl's ``kl_loss_type="k3+"``, k2 - sg(k2) + sg(k3): k3's value, k2's gradient
    (straight-through; verl ``core_algos.kl_penalty``). "k3 x ratio": TRL's k3 multiplied by the
    importance ratio pi / sg(pi_old) (``use_bias_correction_kl``); the ratio's value is 1, its gradient
    is not 0.
    """
    theta = logits.detach().clone().requires_grad_(True)                     # [N, V]

    def grad(f):
        (g,) = torch.autograd.grad(f(theta.log_softmax(-1)), theta)
        return g

    def weighted(per_token):
        return lambda logp: (logp.exp().detach() * per_token(logp)).sum()

    def k3_plus(logp):
        k2, k3 = kl_lib.kl_estimate(logp, ref_logp, kind="k2"), kl_lib.kl_estimate(logp, ref_logp, kind="k3")
        return k2 - k2.detach() + k3.detach()

    def k3_ratio(logp):
        return torch.exp(logp - logp.detach()) * kl_lib.kl_estimate(logp, ref_logp, kind="k3")

    return {"k3+": grad(weighted(k3_plus)), "k3 x ratio": grad(weighted(k3_ratio))}


def relative_gap(a: Tensor, b: Tensor) -> float:
    """|a - b| / |b| (Euclidean norms)."""
    return float((a - b).norm() / b.norm())


# --------------------------------------------------------------------------------------------
# the adaptive KL controller on a toy policy
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ControllerRun:
    beta: Tensor          # [steps] beta used at each step
    kl: Tensor            # [steps] true KL(pi || pi_ref) after each step
    kl_measured: Tensor   # [steps] what the controller saw (k1 mean over n_samples, or the true KL)


def adaptive_kl_run(target_kl: float, steps: int = 3000, beta0: float = 0.2, reward_slope: float = 0.05,
                    lr: float = 0.5, n_samples: int = 64, horizon: int = 10000, adaptive: bool = True,
                    seed: int = 0) -> ControllerRun:
    """A one-parameter policy pi = N(mu, 1), reference N(0, 1), reward slope * x, trained with the KL
    in the reward: each step ascends slope * mu - beta * KL with KL = mu^2 / 2 (exact gradient), then
    measures KL as the mean k1 of ``n_samples`` draws from pi (n_samples = 0: the exact KL) and
    updates beta with ``kl.adaptive_kl_update`` (n_steps = n_samples or 64). ``adaptive=False``: fixed beta
    (nothing measured: kl_measured is the true KL).

    Without noise the policy settles at mu = slope / beta, KL = slope^2 / (2 beta^2).
    """
    if not isinstance(target_kl, (int, float)) or isinstance(target_kl, bool) or not target_kl > 0:
        raise ValueError(f"target_kl must be a number > 0, got {target_kl!r}")
    gen = torch.Generator().manual_seed(seed)
    mu, beta = 0.0, float(beta0)
    betas, kls, measured = [], [], []
    for _ in range(steps):
        betas.append(beta)
        mu += lr * (reward_slope - beta * mu)                               # d/dmu (slope mu - beta mu^2/2)
        kls.append(mu * mu / 2)
        if n_samples and adaptive:                                          # a fixed beta needs no measurement
            x = mu + torch.randn(1, n_samples, generator=gen, dtype=torch.float64)    # [1, n] ~ pi
            logp, ref_logp = -0.5 * (x - mu) ** 2, -0.5 * x ** 2             # log densities (same constant)
            kl_now = float(kl_lib.kl_k1(logp, ref_logp).mean())
        else:
            kl_now = mu * mu / 2
        measured.append(kl_now)
        if adaptive:
            beta = kl_lib.adaptive_kl_update(beta, kl_now, float(target_kl), n_samples or 64, horizon)
    f64 = torch.float64
    return ControllerRun(torch.tensor(betas, dtype=f64), torch.tensor(kls, dtype=f64), torch.tensor(measured, dtype=f64))


# --------------------------------------------------------------------------------------------
# where verl clips
# --------------------------------------------------------------------------------------------

VERL_K3_LOG_RATIO_CLAMP = 20.0
VERL_K3_VALUE_CAP = 10.0


def verl_kl_penalty(logp: Tensor, ref_logp: Tensor, kind: str) -> Tensor:
    """verl 0.9.1's per-token KL (``core_algos.kl_penalty_forward``), restated: k1 and k2 with no clamp;
    k3 ("low_var_kl") with log r clamped to [-20, 20] and the value clamped to [-10, 10], so a token
    whose k3 exceeds 10 gets a gradient of 0. Estimates KL(pi || pi_ref), tokens sampled from pi."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    log_r = ref_logp - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r ** 2
    log_r = log_r.clamp(-VERL_K3_LOG_RATIO_CLAMP, VERL_K3_LOG_RATIO_CLAMP)
    return (log_r.exp() - log_r - 1).clamp(-VERL_K3_VALUE_CAP, VERL_K3_VALUE_CAP)


def clamp_comparison(log_ratios) -> dict[str, Tensor]:
    """For tokens with the given log r = log pi_ref - log pi: each estimator's value and its gradient
    d k / d logp, in course_lib and in verl. -> {"course k1": [N], "course d k1": [N], "verl k1": ...}."""
    log_r = torch.as_tensor(log_ratios, dtype=torch.float64)
    out = {}
    for who, fn in (("course", lambda lp, ref, k: kl_lib.kl_estimate(lp, ref, kind=k)),
                    ("verl", verl_kl_penalty)):
        for kind in KINDS:
            logp = torch.zeros(1, log_r.numel(), dtype=torch.float64, requires_grad=True)
            value = fn(logp, log_r[None, :], kind)                          # ref_logp = log r, logp = 0
            (g,) = torch.autograd.grad(value.sum(), logp)
            out[f"{who} {kind}"] = value.detach()[0]
            out[f"{who} d{kind}"] = g[0]
    return out


def verl_k3_cap_bounds() -> tuple[float, float]:
    """The two log r where k3 = (r - 1) - log r reaches verl's cap of 10 (bisection, float64):
    beyond them verl's k3 is constant and its gradient 0."""
    def k3(x):
        return torch.expm1(torch.tensor(x, dtype=torch.float64)).item() - x

    bounds = []
    for lo, hi in ((-VERL_K3_VALUE_CAP - 2, 0.0), (0.0, 5.0)):              # k3 monotone on each side of 0
        for _ in range(200):
            mid = (lo + hi) / 2
            if (k3(mid) > VERL_K3_VALUE_CAP) == (lo < 0 and hi <= 0):
                lo = mid
            else:
                hi = mid
        bounds.append((lo + hi) / 2)
    return bounds[0], bounds[1]
