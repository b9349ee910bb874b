"""Cases for ex05."""
import math

import torch

from course_lib.judge.cases import Case, gen, loss_edge_cases, random_loss_cases, logps, poison, random_mask

FN = "ppo_clip_loss"


def _one_token(ratios, advs, dtype=torch.float32):
    old = torch.full((len(ratios), 1), -1.0, dtype=dtype)
    logp = old + torch.log(torch.tensor(ratios, dtype=dtype))[:, None]
    return {"logp": logp, "old_logp": old, "adv": torch.tensor(advs, dtype=dtype),
            "mask": torch.ones(len(ratios), 1, dtype=torch.bool)}


def cases():
    out = []
    # r = 1.5, 0.5, 1.1, 0.7 with A = +1, +1, -1, -1: losses -1.2, -0.5, 1.1, 0.8 (two clipped)
    out.append(Case("fixed: four one-token responses, two of them clipped: loss 0.05", FN,
                    _one_token([1.5, 0.5, 1.1, 0.7], [1.0, 1.0, -1.0, -1.0]), kind="fixed",
                    sample=True, expected=torch.tensor(0.05), grad_wrt="logp", out_grad="required"))
    out.append(Case("fixed: gradient of the same four tokens: clipped ones get exactly 0", FN,
                    _one_token([1.5, 0.5, 1.1, 0.7], [1.0, 1.0, -1.0, -1.0], torch.float64),
                    kind="grad", sample=True, grad_wrt="logp", out_grad="required",
                    expected=torch.tensor(0.05, dtype=torch.float64),
                    expected_grad=torch.tensor([[0.0], [-0.125], [0.275], [0.0]], dtype=torch.float64),
                    grad_atol=1e-12))
    out.append(Case("fixed: Clip-Higher, r = 1.25 and A = 1 is not clipped with eps_high = 0.28",
                    FN, _one_token([1.25, 1.25], [1.0, 1.0]), {"eps_low": 0.2, "eps_high": 0.28},
                    kind="fixed", expected=torch.tensor(-1.25), grad_wrt="logp"))
    out.append(Case("fixed: on-policy (r = 1): the loss is minus the token-mean advantage", FN,
                    {"logp": torch.full((2, 3), -0.7), "old_logp": torch.full((2, 3), -0.7),
                     "adv": torch.tensor([2.0, -1.0]),
                     "mask": torch.tensor([[True, True, True], [True, False, False]])},
                    kind="fixed", expected=torch.tensor(-(2.0 * 3 - 1.0) / 4), grad_wrt="logp"))
    g = gen(5)
    for i, (el, eh) in enumerate(((0.2, 0.2), (0.2, 0.28), (0.1, 0.3))):
        out += random_loss_cases(FN, g, {"eps_low": el, "eps_high": eh},
                                 f", eps_low={el}, eps_high={eh}", spread=0.3, sample=i == 0)
    B, T = 6, 9
    logp, old = logps(g, B, T, spread=0.3, dtype=torch.float64)
    mask = random_mask(g, B, T)
    out.append(Case("edge: NaN and huge values in the padding change neither loss nor gradient", FN,
                    {"logp": poison(logp, mask, float("nan")), "old_logp": poison(old, mask, -1e4),
                     "adv": torch.randn(B, generator=g, dtype=torch.float64), "mask": mask},
                    kind="grad", grad_wrt="logp", out_grad="required"))
    mask_e = mask.clone()
    mask_e[1] = False
    out.append(Case("edge: a fully masked response contributes nothing", FN,
                    {"logp": logp, "old_logp": old,
                     "adv": torch.randn(B, generator=g, dtype=torch.float64), "mask": mask_e},
                    kind="grad", grad_wrt="logp", out_grad="required"))
    out += loss_edge_cases(FN, g, logp, old)
    return out
