"""Cases for ex02."""
import torch

from course_lib.judge.cases import Case, gen

FN = "rloo_advantages"


def cases():
    g = gen(2)
    return [
        Case("fixed: [1, 0, 0, 1, 1] with G=5 gives [0.5, -0.75, -0.75, 0.5, 0.5]", FN,
             {"rewards": torch.tensor([1.0, 0, 0, 1, 1]), "group_size": 5}, kind="fixed",
             sample=True, expected=torch.tensor([0.5, -0.75, -0.75, 0.5, 0.5])),
        Case("fixed: G=2, each response minus the other one", FN,
             {"rewards": torch.tensor([3.0, 1.0, 0.5, 0.5]), "group_size": 2}, kind="fixed",
             sample=True, expected=torch.tensor([2.0, -2.0, 0.0, 0.0])),
        Case("fixed: two groups of G=3 use their own baselines", FN,
             {"rewards": torch.tensor([1.0, 2.0, 3.0, 10.0, 10.0, 40.0]), "group_size": 3},
             kind="fixed", expected=torch.tensor([-1.5, 0.0, 1.5, -15.0, -15.0, 30.0])),
        Case("edge: a group with equal rewards gets 0", FN,
             {"rewards": torch.tensor([0.7, 0.7, 0.7, 0.7, 0.0, 1.0, 1.0, 0.0]), "group_size": 4},
             kind="edge", atol=1e-6),
        Case("random: 8 groups of G=8", FN,
             {"rewards": torch.randn(64, generator=g), "group_size": 8}, kind="random"),
        Case("random: 0/1 rewards, G=16", FN,
             {"rewards": torch.randint(0, 2, (64,), generator=g).float(), "group_size": 16},
             kind="random"),
        Case("random: one group covering the batch", FN,
             {"rewards": torch.rand(7, generator=g), "group_size": 7}, kind="random"),
    ]
