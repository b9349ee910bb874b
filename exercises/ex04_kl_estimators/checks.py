"""Cases for ex04."""
import math

import torch

from course_lib.judge.cases import Case, gen
from course_lib.judge.grading import grad_weights

FNS = ("kl_k1", "kl_k2", "kl_k3")


def _nonnegative(got):
    if isinstance(got, torch.Tensor) and bool((got < 0).any()):
        return (f"k3 must be >= 0 everywhere, but {int((got < 0).sum())} values are negative "
                f"(smallest {float(got.min()):.3g}) for log-ratios near 0")
    return None


def cases():
    out = []
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    ref = torch.log(torch.tensor([[0.25, 0.25]]))
    l2 = math.log(2)
    want = {"kl_k1": [l2, 0.0], "kl_k2": [0.5 * l2 ** 2, 0.0], "kl_k3": [-0.5 + l2, 0.0]}
    for fn in FNS:
        out.append(Case(f"fixed: pi = (0.5, 0.25), pi_ref = (0.25, 0.25), {fn}", fn,
                        {"logp": logp, "ref_logp": ref}, kind="fixed", sample=True,
                        expected=torch.tensor([want[fn]])))
    # known gradients w.r.t. logp: k1 -> 1, k2 -> logp - ref_logp, k3 -> 1 - r
    lp = torch.log(torch.tensor([[0.5, 0.2, 0.9]], dtype=torch.float64))
    rf = torch.log(torch.tensor([[0.25, 0.4, 0.9]], dtype=torch.float64))
    r = (rf - lp).exp()
    local = {"kl_k1": torch.ones_like(lp), "kl_k2": lp - rf, "kl_k3": 1 - r}
    for fn in FNS:
        out.append(Case(f"fixed: gradient w.r.t. logp of {fn} (as a loss term)", fn,
                        {"logp": lp, "ref_logp": rf}, kind="grad", grad_wrt="logp",
                        out_grad="required", sample=True,
                        expected_grad=grad_weights(lp) * local[fn], grad_atol=1e-10))
    g = gen(4)
    for fn in FNS:
        ref_logp = -torch.rand(6, 10, generator=g) * 4
        logp = ref_logp + 0.5 * torch.randn(6, 10, generator=g)
        out.append(Case(f"random: values, {fn}", fn, {"logp": logp, "ref_logp": ref_logp}))
        ref_logp = -torch.rand(6, 10, generator=g, dtype=torch.float64) * 4
        logp = ref_logp + 0.5 * torch.randn(6, 10, generator=g, dtype=torch.float64)
        out.append(Case(f"random: gradient w.r.t. logp, {fn}", fn,
                        {"logp": logp, "ref_logp": ref_logp}, kind="grad", grad_wrt="logp",
                        out_grad="required"))
        same = -torch.rand(3, 5, generator=g)
        out.append(Case(f"edge: identical policies give 0, {fn}", fn,
                        {"logp": same, "ref_logp": same.clone()}, kind="edge",
                        expected=torch.zeros(3, 5), atol=1e-7))
        ref_logp = -torch.rand(4, 6, generator=g) * 2
        logp = ref_logp + 3.0 * torch.randn(4, 6, generator=g)
        out.append(Case(f"edge: policies far apart (|log r| up to ~9), {fn}", fn,
                        {"logp": logp, "ref_logp": ref_logp}, kind="edge", rtol=1e-4))
    ref_logp = -torch.rand(8, 64, generator=g) * 0.01 - 0.001     # likely tokens: fine float32 grid
    logp = ref_logp + 1e-4 * torch.randn(8, 64, generator=g)
    out.append(Case("edge: log-ratios near 0 (float32), k3 stays >= 0", "kl_k3",
                    {"logp": logp, "ref_logp": ref_logp}, kind="edge", check=_nonnegative))
    return out
