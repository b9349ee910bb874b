"""Cases for ex10."""
import torch

from course_lib.judge.cases import Case, gen, lengths_mask, poison, random_mask

FN = "gae"
OUT = ("adv", "returns")


def _holes(g, B, T):
    """Right-padded masks with a few masked positions inside the responses."""
    mask = random_mask(g, B, T, min_len=3)
    holes = torch.rand(B, T, generator=g) < 0.2
    holes[:, 0] = False
    return mask & ~holes


def cases():
    out = []
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.5, 0.6, 0.7]])
    m = torch.ones(1, 3, dtype=torch.bool)
    out.append(Case("fixed: rewards [0, 0, 1], values [0.5, 0.6, 0.7], gamma = lam = 1", FN,
                    {"rewards": r, "values": v, "mask": m}, {"gamma": 1.0, "lam": 1.0},
                    kind="fixed", sample=True, out_names=OUT,
                    expected=(torch.tensor([[0.5, 0.4, 0.3]]), torch.tensor([[1.0, 1.0, 1.0]]))))
    out.append(Case("fixed: the same with lam = 0.95", FN,
                    {"rewards": r, "values": v, "mask": m}, kind="fixed", sample=True, out_names=OUT,
                    expected=(torch.tensor([[0.46575, 0.385, 0.3]]),
                              torch.tensor([[0.96575, 0.985, 1.0]]))))
    out.append(Case("fixed: a response of 2 tokens followed by junk padding", FN,
                    {"rewards": torch.tensor([[0.0, 1.0, 7.0]]),
                     "values": torch.tensor([[0.2, 0.4, 9.0]]), "mask": lengths_mask([2], 3)},
                    kind="fixed", sample=True, out_names=OUT,
                    expected=(torch.tensor([[0.77, 0.6, 0.0]]), torch.tensor([[0.97, 1.0, 0.0]]))))
    out.append(Case("fixed: a masked tool token inside the response is skipped (gamma 0.9, lam 0.8)",
                    FN, {"rewards": torch.tensor([[0.0, 5.0, 1.0]]),
                         "values": torch.tensor([[0.5, 3.0, 0.7]]),
                         "mask": torch.tensor([[True, False, True]])},
                    {"gamma": 0.9, "lam": 0.8}, kind="fixed", out_names=OUT,
                    expected=(torch.tensor([[0.346, 0.0, 0.3]]), torch.tensor([[0.846, 0.0, 1.0]]))))
    g = gen(10)
    for gamma, lam in ((1.0, 0.95), (0.99, 0.9), (0.9, 1.0)):
        B, T = 6, 10
        mask = random_mask(g, B, T)
        out.append(Case(f"random: right padding with junk, gamma={gamma}, lam={lam}", FN,
                        {"rewards": poison(torch.randn(B, T, generator=g), mask, g=g),
                         "values": poison(torch.randn(B, T, generator=g), mask, g=g), "mask": mask},
                        {"gamma": gamma, "lam": lam}, out_names=OUT, sample=gamma == 1.0))
        mask = _holes(g, B, T)
        out.append(Case(f"random: masked tokens inside responses, gamma={gamma}, lam={lam}", FN,
                        {"rewards": poison(torch.randn(B, T, generator=g), mask, g=g),
                         "values": poison(torch.randn(B, T, generator=g), mask, g=g), "mask": mask},
                        {"gamma": gamma, "lam": lam}, out_names=OUT))
    B, T = 4, 6
    mask = random_mask(g, B, T)
    mask[1] = False
    mask[2] = False
    mask[2, 0] = True
    out.append(Case("edge: an empty response and a one-token response, NaN padding", FN,
                    {"rewards": poison(torch.randn(B, T, generator=g), mask, float("nan")),
                     "values": poison(torch.randn(B, T, generator=g), mask, float("nan")),
                     "mask": mask}, kind="edge", out_names=OUT))
    out.append(Case("edge: no padding at all", FN,
                    {"rewards": torch.randn(3, 5, generator=g), "values": torch.randn(3, 5, generator=g),
                     "mask": torch.ones(3, 5, dtype=torch.bool)}, {"gamma": 0.95, "lam": 0.9},
                    kind="edge", out_names=OUT))
    return out
