"""Cases for ex14."""
import math

import torch

from course_lib.judge.cases import Case, gen, loss_edge_cases, random_loss_cases, logps, poison, random_mask

FN = "dppo_tv_loss"
# (pi, pi_old, A) with delta 0.05 and trunc 3: a rare token tripling (kept, weight 3), a common one
# rising by 0.1 (dropped), one falling by 0.08 with A < 0 (dropped), one falling by 0.02 (kept), a rare
# one at ratio 5 (kept, truncated to 3), one rising by 0.4 against A < 0 (kept: the region is one-sided)
TOKENS = [(0.03, 0.01, 1.0), (0.7, 0.6, 1.0), (0.5, 0.58, -1.0), (0.4, 0.42, -1.0), (0.05, 0.01, 1.0),
          (0.9, 0.5, -1.0)]
KNOBS = {"delta_low": 0.05, "delta_high": 0.05, "trunc": 3.0}


def _inputs(dtype):
    return {"logp": torch.tensor([[math.log(p)] for p, _, _ in TOKENS], dtype=dtype),
            "old_logp": torch.tensor([[math.log(q)] for _, q, _ in TOKENS], dtype=dtype),
            "adv": torch.tensor([a for _, _, a in TOKENS], dtype=dtype),
            "mask": torch.ones(len(TOKENS), 1, dtype=torch.bool)}


def _known():
    n = len(TOKENS)
    loss, grad = 0.0, []
    for p, q, a in TOKENS:
        keep = (p - q <= 0.05) if a > 0 else (p - q >= -0.05)
        w = min(p / q, 3.0) if keep else 0.0
        loss += -w * a * math.log(p) / n
        grad.append([-w * a / n])
    return loss, torch.tensor(grad, dtype=torch.float64)


def cases():
    loss, grad = _known()
    out = [Case("fixed: six tokens, delta 0.05: rare and common ones, rising and falling",
                FN, _inputs(torch.float32), KNOBS, kind="fixed", sample=True,
                expected=torch.tensor(loss), grad_wrt="logp", out_grad="required"),
           Case("fixed: the gradient on the same six tokens", FN,
                _inputs(torch.float64), KNOBS, kind="grad", sample=True,
                expected=torch.tensor(loss, dtype=torch.float64), expected_grad=grad,
                grad_wrt="logp", out_grad="required", grad_atol=1e-12)]
    g = gen(14)
    for i, kw in enumerate(({}, {"delta_low": 0.05, "delta_high": 0.1, "trunc": 1.5},
                            {"delta_low": 0.3, "delta_high": 0.02, "trunc": 2.0})):
        out += random_loss_cases(FN, g, kw, f" {kw or '(defaults)'}", spread=0.6, sample=i == 0)
    B, T = 6, 9
    logp, old = logps(g, B, T, spread=0.6, dtype=torch.float64)
    mask = random_mask(g, B, T)
    out.append(Case("edge: NaN and huge values in the padding change neither loss nor gradient", FN,
                    {"logp": poison(logp, mask, float("nan")), "old_logp": poison(old, mask, 1e4),
                     "adv": torch.randn(B, generator=g, dtype=torch.float64), "mask": mask},
                    {"delta_low": 0.05, "delta_high": 0.05}, kind="grad", grad_wrt="logp",
                    out_grad="required"))
    out += loss_edge_cases(FN, g, logp, old)
    return out
