"""Cases for ex01 (see course_lib/judge/cases.py for what a Case is)."""
import math

import torch

from course_lib.judge.cases import Case, gen

FN = "group_advantages"


def _exact_zeros(rows: slice):
    """Exactness where it is the lesson: the all-equal group's entries must be 0 to the last bit
    (the other group is graded with the usual tolerance)."""
    def check(adv):
        part = adv[rows]
        if bool((part == 0).all()):
            return None
        worst = float(part.abs().max())
        return (f"the all-equal group's advantages must be exactly 0, not within a tolerance; "
                f"yours reach {worst:.3g} (a rounding residue divided by std + eps?)")
    return check


def cases():
    out = []
    s = math.sqrt(1 / 3)                                        # Bessel std of [1, 0, 0, 1]
    out.append(Case("fixed: the chapter's group [1, 0, 0, 1] (G=4) gives +-0.866", FN,
                    {"rewards": torch.tensor([1.0, 0.0, 0.0, 1.0]), "group_size": 4},
                    kind="fixed", sample=True,
                    expected=torch.tensor([0.5, -0.5, -0.5, 0.5]) / (s + 1e-6)))
    out.append(Case("fixed: Dr. GRPO (scale=False) subtracts the group mean only", FN,
                    {"rewards": torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0]), "group_size": 5},
                    {"scale": False}, kind="fixed", sample=True,
                    expected=torch.tensor([0.4, -0.6, -0.6, 0.4, 0.4])))
    out.append(Case("fixed: two groups of G=2 are normalised separately", FN,
                    {"rewards": torch.tensor([1.0, 3.0, 10.0, 10.5]), "group_size": 2},
                    kind="fixed",
                    expected=torch.tensor([-1.0, 1.0, -0.25, 0.25])
                    / torch.tensor([math.sqrt(2) + 1e-6] * 2 + [math.sqrt(0.125) + 1e-6] * 2)))
    out.append(Case("edge: all-correct and all-wrong groups get exactly 0", FN,
                    {"rewards": torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1]),
                     "group_size": 4}, kind="edge", sample=True, atol=1e-6))
    out.append(Case("edge: a group of six equal rewards 0.3 gets exactly 0 (no rounding residue)",
                    FN, {"rewards": torch.tensor([0.3] * 6 + [0.1, 0.9, 0.5, 0.2, 0.7, 0.4]),
                         "group_size": 6}, kind="edge", check=_exact_zeros(slice(0, 6))))
    g = gen(1)
    out.append(Case("random: 8 groups of G=8, continuous rewards", FN,
                    {"rewards": torch.randn(64, generator=g), "group_size": 8}, kind="random"))
    out.append(Case("random: 0/1 rewards, 16 groups of G=4 (some without signal)", FN,
                    {"rewards": torch.randint(0, 2, (64,), generator=g).float(), "group_size": 4},
                    kind="random"))
    out.append(Case("random: G=2", FN,
                    {"rewards": torch.rand(20, generator=g), "group_size": 2}, kind="random"))
    out.append(Case("random: scale=False", FN,
                    {"rewards": torch.randn(30, generator=g), "group_size": 5}, {"scale": False},
                    kind="random"))
    out.append(Case("random: eps=0.1 is used", FN,
                    {"rewards": torch.rand(24, generator=g), "group_size": 6}, {"eps": 0.1},
                    kind="random"))
    out.append(Case("edge: one group covering the whole batch", FN,
                    {"rewards": torch.tensor([0.2, 0.9, 0.4]), "group_size": 3}, kind="edge"))
    return out
