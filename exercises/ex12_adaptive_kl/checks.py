"""Cases for ex12."""
import random

from course_lib.judge.cases import Case

FN = "adaptive_kl_update"
TOL = {"atol": 1e-12, "rtol": 1e-9}


def _args(beta, kl, target, n, h):
    return {"beta": beta, "current_kl": kl, "target_kl": target, "n_steps": n, "horizon": h}


def cases():
    out = [
        Case("fixed: KL 0.15 for a target of 0.1: error 0.5 clipped to 0.2 -> 0.200256", FN,
             _args(0.2, 0.15, 0.1, 64, 10000), kind="fixed", sample=True, expected=0.200256, **TOL),
        Case("fixed: KL 0.09 for a target of 0.1: error -0.1 (not clipped) -> 0.199872", FN,
             _args(0.2, 0.09, 0.1, 64, 10000), kind="fixed", sample=True, expected=0.199872, **TOL),
        Case("fixed: KL 0 gives the largest decrease, error -0.2", FN,
             _args(0.2, 0.0, 0.1, 64, 10000), kind="fixed", expected=0.2 * (1 - 0.2 * 64 / 10000),
             **TOL),
        Case("fixed: KL on target leaves beta unchanged", FN,
             _args(0.05, 6.0, 6.0, 256, 10000), kind="fixed", expected=0.05, **TOL),
        Case("fixed: a big step, n_steps/horizon = 0.5, error 0.2 -> beta x 1.1", FN,
             _args(1.0, 1.0, 0.1, 500, 1000), kind="fixed", expected=1.1, **TOL),
        Case("edge: a target of 6 (summed per-sequence KL), KL slightly above", FN,
             _args(0.2, 6.3, 6.0, 64, 10000), kind="edge", **TOL),
    ]
    rng = random.Random(12)
    for k in range(8):
        target = rng.choice([0.01, 0.1, 1.0, 6.0])
        kl = target * rng.uniform(0.0, 2.0)
        out.append(Case(f"random: beta, KL and target #{k + 1}", FN,
                        _args(rng.uniform(0.001, 1.0), kl, target, rng.choice([1, 64, 512]),
                              rng.choice([100, 10000])), **TOL))
    return out
