"""Cases for ex15."""
import torch

from course_lib.judge.cases import Case, gen, lengths_mask, poison, random_mask

FN = "reinforce_pp_advantages"


def _holes(g, B, T):
    """Right-padded masks with a few masked positions (tool outputs) inside the responses."""
    mask = random_mask(g, B, T, min_len=3)
    holes = torch.rand(B, T, generator=g) < 0.2
    holes[:, 0] = False
    return mask & ~holes


def _outcome(g, mask):
    """A 0/1 reward on each response's last valid token, junk elsewhere in the padding."""
    last = (mask.long().cumsum(-1) == mask.sum(-1, keepdim=True)) & mask
    r = (torch.rand(mask.shape[0], generator=g) > 0.5).float()[:, None] * last
    return poison(r, mask, g=g)


def _whitened(rows):
    """The README's formula on a few returns (None: padding)."""
    xs = [x for row in rows for x in row if x is not None]
    mean = sum(xs) / len(xs)
    std = (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) + 1e-8) ** 0.5
    return torch.tensor([[0.0 if x is None else (x - mean) / std for x in row] for row in rows])


def cases():
    s = 0.25 + 1e-8
    out = [Case("fixed: rewards 1 and 0 on responses of 3 and 1 tokens: mu = 3/4, sigma = 1/2", FN,
                {"rewards": torch.tensor([[0.0, 0.0, 1.0], [0.0, 9.0, 9.0]]), "mask": lengths_mask([3, 1], 3)},
                kind="fixed", sample=True,
                expected=torch.tensor([[0.25, 0.25, 0.25], [-0.75, 0.0, 0.0]]) / s ** 0.5),
           Case("fixed: gamma 0.5 and a masked tool token: returns 0.5, -, 1 and 2", FN,
                {"rewards": torch.tensor([[0.0, 7.0, 1.0], [2.0, 0.0, 0.0]]),
                 "mask": torch.tensor([[True, False, True], [True, False, False]])}, {"gamma": 0.5},
                kind="fixed", sample=True, expected=_whitened([[0.5, None, 1.0], [2.0, None, None]]))]
    g = gen(15)
    for gamma in (1.0, 0.9):
        B, T = 8, 10
        mask = random_mask(g, B, T)
        out.append(Case(f"random: outcome rewards on the last token, gamma={gamma}", FN,
                        {"rewards": _outcome(g, mask), "mask": mask}, {"gamma": gamma}, sample=gamma == 1.0))
        out.append(Case(f"random: token rewards (a KL penalty) and junk padding, gamma={gamma}", FN,
                        {"rewards": poison(torch.randn(B, T, generator=g), mask, g=g), "mask": mask},
                        {"gamma": gamma}))
        mask = _holes(g, B, T)
        out.append(Case(f"random: masked tool tokens inside responses, gamma={gamma}", FN,
                        {"rewards": poison(torch.randn(B, T, generator=g), mask, g=g), "mask": mask},
                        {"gamma": gamma}))
    B, T = 5, 6
    mask = random_mask(g, B, T)
    mask[1] = False
    out.append(Case("edge: an empty response and NaN padding", FN,
                    {"rewards": poison(torch.randn(B, T, generator=g), mask, float("nan")), "mask": mask},
                    kind="edge"))
    out.append(Case("edge: the advantages carry no gradient", FN,
                    {"rewards": torch.randn(B, T, generator=g, dtype=torch.float64), "mask": mask},
                    kind="edge", grad_wrt="rewards", out_grad="forbidden", sample=True))
    return out
