"""Cases for ex08."""
import math

import torch

from course_lib.judge.cases import Case, gen, loss_edge_cases, random_loss_cases, lengths_mask, logps, poison, random_mask

FN = "sapo_loss"


def _sig(x):
    return 1 / (1 + math.exp(-x))


def cases():
    out = []
    # two one-token responses at r = 2: A = +1 (tau 1) and A = -1 (tau 1.05)
    f_pos, f_neg = 4 * _sig(1.0), 4 / 1.05 * _sig(1.05)
    c_pos = 4 * _sig(1.0) * (1 - _sig(1.0)) * 2 * 1.0          # fact sheet: 1.573
    c_neg = 4 * _sig(1.05) * (1 - _sig(1.05)) * 2 * -1.0       # fact sheet: -1.536
    for dtype, kind in ((torch.float32, "fixed"), (torch.float64, "grad")):
        old = torch.full((2, 1), -1.0, dtype=dtype)
        logp = old + math.log(2.0)
        inputs = {"logp": logp, "old_logp": old, "adv": torch.tensor([1.0, -1.0], dtype=dtype),
                  "mask": torch.ones(2, 1, dtype=torch.bool)}
        out.append(Case("fixed: r = 2 with A = +1 (tau_pos) and A = -1 (tau_neg)"
                        + (": gradient coefficients 1.573 and -1.536" if kind == "grad" else ""),
                        FN, inputs, kind=kind, sample=True,
                        expected=torch.tensor((-f_pos + f_neg) / 2, dtype=dtype),
                        expected_grad=(torch.tensor([[-c_pos / 2], [-c_neg / 2]], dtype=torch.float64)
                                       if kind == "grad" else None),
                        grad_wrt="logp", out_grad="required", grad_atol=1e-12))
    mask = lengths_mask([1, 3], 3)
    logp = torch.full((2, 3), -0.4, dtype=torch.float64)
    out.append(Case("fixed: on-policy (r = 1), lengths 1 and 3: gradient -A / (B |y_i|)", FN,
                    {"logp": logp, "old_logp": logp.clone(),
                     "adv": torch.tensor([1.0, -1.0], dtype=torch.float64), "mask": mask},
                    kind="grad", expected=torch.tensor((-2.0 + 2 / 1.05) / 2, dtype=torch.float64),
                    expected_grad=torch.tensor([[-0.5, 0, 0], [1 / 6, 1 / 6, 1 / 6]],
                                               dtype=torch.float64),
                    grad_wrt="logp", out_grad="required", grad_atol=1e-12))
    g = gen(8)
    for i, kw in enumerate(({}, {"tau_pos": 0.5, "tau_neg": 2.0})):
        out += random_loss_cases(FN, g, kw, f" {kw or '(defaults)'}", spread=0.6, sample=i == 0)
    B, T = 6, 9
    logp, old = logps(g, B, T, spread=0.6, dtype=torch.float64)
    mask = random_mask(g, B, T)
    mask[2] = False
    out.append(Case("edge: NaN in the padding and an empty response change nothing", FN,
                    {"logp": poison(logp, mask, float("nan")), "old_logp": poison(old, mask, 1e4),
                     "adv": torch.randn(B, generator=g, dtype=torch.float64), "mask": mask},
                    kind="grad", grad_wrt="logp", out_grad="required"))
    out += loss_edge_cases(FN, g, logp, old, one_token=None)
    return out
