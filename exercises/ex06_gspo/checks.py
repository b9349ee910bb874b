"""Cases for ex06."""
import math

import torch

from course_lib.judge.cases import Case, gen, loss_edge_cases, lengths_mask, poison, random_mask

FN = "gspo_loss"
TIGHT = {"atol": 1e-6, "rtol": 1e-6}       # the clip range itself is 4e-4 wide


def _near_one(g, B, T, dtype, spread=1e-3):
    """logp, old_logp, mask with per-response mean log-ratios spread around the clip bounds."""
    mask = random_mask(g, B, T)
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 0.5 - 0.05
    delta = spread * torch.randn(B, T, generator=g, dtype=torch.float64)
    targets = torch.linspace(-1e-3, 1e-3, B, dtype=torch.float64)[torch.randperm(B, generator=g)]
    delta = torch.where(mask, delta, torch.zeros_like(delta))
    row_mean = delta.sum(1) / mask.sum(1)
    delta = delta + (targets - row_mean)[:, None]
    return (old + delta).to(dtype), old.to(dtype), mask


def cases():
    out = []
    # row 0: log-ratios 2e-4, 4e-4 -> s = e^3e-4 (inside); row 1: 1e-3 twice -> clipped at 1+4e-4
    for dtype, kind in ((torch.float32, "fixed"), (torch.float64, "grad")):
        old = torch.full((2, 3), -0.5, dtype=dtype)
        logp = old + torch.tensor([[2e-4, 4e-4, 0.0], [1e-3, 1e-3, 0.0]], dtype=dtype)
        mask = lengths_mask([2, 2], 3)
        s0 = math.exp(3e-4)
        want = torch.tensor((-s0 - (1 + 4e-4)) / 2, dtype=dtype)
        grad = torch.tensor([[-s0 / 4, -s0 / 4, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
        out.append(Case("fixed: s = e^(3e-4) stays inside the range, s = e^(1e-3) is clipped"
                        + (" (gradient: the clipped response gets none)" if kind == "grad" else ""),
                        FN, {"logp": logp, "old_logp": old, "adv": torch.ones(2, dtype=dtype),
                             "mask": mask}, kind=kind, sample=True, expected=want,
                        expected_grad=grad if kind == "grad" else None, grad_wrt="logp",
                        out_grad="required", grad_atol=1e-12, **TIGHT))
    g = gen(6)
    for i in range(2):
        logp, old, mask = _near_one(g, 10, 12, torch.float32)
        out.append(Case("random: values, sequence ratios on both sides of the clip range", FN,
                        {"logp": logp, "old_logp": old, "adv": torch.randn(10, generator=g),
                         "mask": mask}, grad_wrt="logp", out_grad="required", sample=i == 0,
                        **TIGHT))
        logp, old, mask = _near_one(g, 10, 12, torch.float64)
        out.append(Case("random: gradient w.r.t. logp, ratios on both sides of the range", FN,
                        {"logp": logp, "old_logp": old,
                         "adv": torch.randn(10, generator=g, dtype=torch.float64), "mask": mask},
                        kind="grad", grad_wrt="logp", out_grad="required", **TIGHT))
    logp, old, mask = _near_one(g, 8, 10, torch.float64, spread=0.3)
    out.append(Case("random: gradient with wide ratios, eps_low = eps_high = 0.2", FN,
                    {"logp": logp, "old_logp": old,
                     "adv": torch.randn(8, generator=g, dtype=torch.float64), "mask": mask},
                    {"eps_low": 0.2, "eps_high": 0.2}, kind="grad", grad_wrt="logp",
                    out_grad="required"))
    logp, old, mask = _near_one(g, 6, 9, torch.float64)
    out.append(Case("edge: NaN and huge values in the padding change neither loss nor gradient", FN,
                    {"logp": poison(logp, mask, float("nan")), "old_logp": poison(old, mask, 1e4),
                     "adv": torch.randn(6, generator=g, dtype=torch.float64), "mask": mask},
                    kind="grad", grad_wrt="logp", out_grad="required", **TIGHT))
    mask_e = mask.clone()
    mask_e[3] = False
    out.append(Case("edge: an empty response is neither counted nor given gradient", FN,
                    {"logp": logp, "old_logp": old,
                     "adv": torch.randn(6, generator=g, dtype=torch.float64), "mask": mask_e},
                    kind="grad", grad_wrt="logp", out_grad="required", **TIGHT))
    out += loss_edge_cases(FN, g, logp, old, one_token="edge: one-token responses (s is that token's ratio)",
                           **TIGHT)
    return out
