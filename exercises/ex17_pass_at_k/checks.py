"""Cases for ex17."""
import torch

from course_lib.judge.cases import Case, gen

FN = "pass_at_k"


def cases():
    g = gen(17)
    out = [
        Case("fixed: n = 4, c = 1: pass@1 = 0.25, pass@2 = 0.5", FN,
             {"n": torch.tensor([4, 4]), "c": torch.tensor([1, 1]), "k": 2}, kind="fixed", sample=True,
             expected=torch.tensor([0.5, 0.5], dtype=torch.float64)),
        Case("fixed: n = 10, c = 3, k = 2: 1 - C(7,2)/C(10,2) = 1 - 21/45", FN,
             {"n": torch.tensor([10]), "c": torch.tensor([3]), "k": 2}, kind="fixed", sample=True,
             expected=torch.tensor([1 - 21 / 45], dtype=torch.float64)),
        Case("edge: no right answer gives 0, fewer than k wrong ones give 1, exactly k wrong ones do not", FN,
             {"n": torch.tensor([8, 8, 8, 8, 8]), "c": torch.tensor([0, 1, 5, 6, 8]), "k": 3}, kind="edge",
             expected=torch.tensor([0.0, 1 - 35 / 56, 1 - 1 / 56, 1.0, 1.0], dtype=torch.float64)),
        Case("edge: k = n (every sample drawn): 1 when any is right", FN,
             {"n": torch.tensor([16, 16]), "c": torch.tensor([0, 1]), "k": 16}, kind="edge",
             expected=torch.tensor([0.0, 1.0], dtype=torch.float64)),
        Case("edge: n = 2000, k = 1000, whose binomials overflow float64", FN,
             {"n": torch.tensor([2000, 2000, 2000]), "c": torch.tensor([1, 2, 10]), "k": 1000}, kind="edge",
             expected=torch.tensor([0.5, 1 - 1000 * 999 / (2000 * 1999),
                                    1 - torch.prod(1 - 1000 / torch.arange(1991, 2001, dtype=torch.float64))
                                    .item()], dtype=torch.float64)),
    ]
    for n, k in ((256, 1), (256, 16), (256, 256), (50, 7)):
        c = torch.randint(0, n + 1, (40,), generator=g)
        out.append(Case(f"random: 40 prompts, n = {n}, k = {k}", FN, {"n": torch.full((40,), n), "c": c, "k": k},
                        sample=k == 16))
    return out
