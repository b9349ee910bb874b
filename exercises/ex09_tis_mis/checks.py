"""Cases for ex09."""
import math

import torch

from course_lib.judge.cases import Case, gen, lengths_mask, poison, random_mask

FNS = ("tis_weights", "mis_weights")


def _from_ratios(rows, T):
    """old_logp, rollout_logp, mask with the given per-token ratios (rows of different lengths)."""
    B = len(rows)
    rollout = torch.full((B, T), -1.5)
    old = rollout.clone()
    for i, row in enumerate(rows):
        old[i, :len(row)] = rollout[i, :len(row)] + torch.log(torch.tensor(row))
    mask = lengths_mask([len(r) for r in rows], T)
    return {"old_logp": poison(old, mask, float("nan")), "rollout_logp": rollout, "mask": mask}


def cases():
    out = []
    inp = _from_ratios([[0.5, 1.5, 3.0], [1.2, 1.5]], 4)
    want_tok = {"tis_weights": [[0.5, 1.5, 2.0, 0], [1.2, 1.5, 0, 0]],
                "mis_weights": [[0.5, 1.5, 0.0, 0], [1.2, 1.5, 0, 0]]}
    want_seq = {"tis_weights": [[2.0, 2.0, 2.0, 0], [1.8, 1.8, 0, 0]],   # 2.25 -> 2; 1.8 kept
                "mis_weights": [[0.0, 0.0, 0.0, 0], [1.8, 1.8, 0, 0]]}   # 2.25 > 2 drops the row
    for fn in FNS:
        out.append(Case(f"fixed: token ratios 0.5, 1.5, 3 and 1.2, 1.5 with cap 2, {fn}", fn, inp,
                        kind="fixed", sample=True, expected=torch.tensor(want_tok[fn])))
        out.append(Case(f"fixed: sequence ratios 2.25 and 1.8 with cap 2, {fn}", fn, inp,
                        {"level": "sequence"}, kind="fixed", sample=True,
                        expected=torch.tensor(want_seq[fn])))
    g = gen(9)
    for fn in FNS:
        for level, spread in (("token", 0.5), ("sequence", 0.15)):
            for cap in (2.0, 1.3):
                B, T = 10, 8
                mask = random_mask(g, B, T)
                roll = -torch.rand(B, T, generator=g) * 3
                old = roll + spread * torch.randn(B, T, generator=g)
                out.append(Case(f"random: {fn}, level={level}, cap={cap}", fn,
                                {"old_logp": old, "rollout_logp": poison(roll, mask, g=g),
                                 "mask": mask}, {"cap": cap, "level": level}))
        B, T = 5, 6
        mask = random_mask(g, B, T)
        roll = -torch.rand(B, T, generator=g) * 3
        old = roll + 0.5 * torch.randn(B, T, generator=g)
        for level in ("token", "sequence"):
            out.append(Case(f"edge: the weights carry no gradient, {fn}, level={level}", fn,
                            {"old_logp": old, "rollout_logp": roll, "mask": mask}, {"level": level},
                            kind="edge", grad_wrt="old_logp", out_grad="forbidden",
                            sample=level == "token"))
        mask_e = mask.clone()
        mask_e[0] = False
        out.append(Case(f"edge: an empty response and NaN padding give 0 weights there, {fn}", fn,
                        {"old_logp": poison(old, mask_e, float("nan")),
                         "rollout_logp": poison(roll, mask_e, float("nan")), "mask": mask_e},
                        {"level": "sequence"}, kind="edge"))
    return out
