"""Cases for ex07."""
import math

import torch

from course_lib.judge.cases import Case, gen, loss_edge_cases, random_loss_cases, logps, poison, random_mask

FN = "cispo_loss"
# (pi, pi_old, A): r = 1.5, 0.5, 1.2, 0.2
TOKENS = [(0.6, 0.4, 1.0), (0.2, 0.4, -1.0), (0.3, 0.25, 2.0), (0.1, 0.5, 1.0)]


def _inputs(dtype):
    p = torch.tensor([[t[0]] for t in TOKENS], dtype=dtype)
    q = torch.tensor([[t[1]] for t in TOKENS], dtype=dtype)
    return {"logp": p.log(), "old_logp": q.log(),
            "adv": torch.tensor([t[2] for t in TOKENS], dtype=dtype),
            "mask": torch.ones(len(TOKENS), 1, dtype=torch.bool)}


def _known(eps_low, eps_high=0.28):
    lo = 0.0 if eps_low is None else 1 - eps_low
    w = [min(max(p / q, lo), 1 + eps_high) for p, q, _ in TOKENS]
    loss = sum(-wi * a * math.log(p) for wi, (p, _, a) in zip(w, TOKENS)) / len(TOKENS)
    grad = torch.tensor([[-wi * a / len(TOKENS)] for wi, (_, _, a) in zip(w, TOKENS)],
                        dtype=torch.float64)
    return loss, grad


def cases():
    out = []
    for eps_low in (None, 0.2):
        loss, grad = _known(eps_low)
        tag = "no lower bound (eps_low=None)" if eps_low is None else "eps_low=0.2"
        out.append(Case(f"fixed: four tokens with r = 1.5, 0.5, 1.2, 0.2, {tag}", FN,
                        _inputs(torch.float32), {"eps_low": eps_low}, kind="fixed", sample=True,
                        expected=torch.tensor(loss), grad_wrt="logp", out_grad="required"))
        out.append(Case(f"fixed: gradient of the same tokens, weight clip(r) A / 4, {tag}", FN,
                        _inputs(torch.float64), {"eps_low": eps_low}, kind="grad",
                        sample=eps_low is None, expected=torch.tensor(loss, dtype=torch.float64),
                        expected_grad=grad, grad_wrt="logp", out_grad="required",
                        grad_atol=1e-12))
    g = gen(7)
    for i, kw in enumerate(({}, {"eps_high": 0.2, "eps_low": 0.2}, {"eps_high": 4.0})):
        out += random_loss_cases(FN, g, kw, f" {kw or '(defaults)'}", spread=0.5, sample=i == 0)
    B, T = 6, 9
    logp, old = logps(g, B, T, spread=0.5, dtype=torch.float64)
    mask = random_mask(g, B, T)
    out.append(Case("edge: NaN and huge values in the padding change neither loss nor gradient", FN,
                    {"logp": poison(logp, mask, float("nan")), "old_logp": poison(old, mask, -1e4),
                     "adv": torch.randn(B, generator=g, dtype=torch.float64), "mask": mask},
                    kind="grad", grad_wrt="logp", out_grad="required"))
    out += loss_edge_cases(FN, g, logp, old)
    return out
