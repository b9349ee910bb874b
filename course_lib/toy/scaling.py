"""Compute curves as ScaleRL reads them (Khatri et al. 2025, "The Art of Scaling Reinforcement
Learning Compute for LLMs", arXiv 2510.13786): accuracy R against training compute C follows

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),

a sigmoid in log C that starts at R0, rises with slope B, is halfway at C_mid and saturates at the
ceiling A. A knob that moves A changes what the run can reach; one that moves B or C_mid changes
only how fast it gets there (efficiency).

``fit_curve`` fits A, B and C_mid by least squares with R0 fixed at the accuracy before RL: for
each (B, C_mid) on a grid the best A is a closed-form line fit, so the search cannot stall in a
local minimum; A is bounded by 1 (an accuracy) and the grid bounds say where a fit is unconstrained.
"""
from __future__ import annotations

import math

import torch

B_GRID = torch.logspace(math.log10(0.2), math.log10(8.0), 120, dtype=torch.float64)


def curve(C, R0: float, A: float, B: float, C_mid: float) -> torch.Tensor:
    """R(C) of the ScaleRL form (float64) at compute C > 0 [N]."""
    C = torch.as_tensor(C, dtype=torch.float64)
    return R0 + (A - R0) / (1.0 + (C_mid / C) ** B)


def fit_curve(C, R, R0: float, *, mid_range: tuple[float, float] = (0.1, 20.0), n_mid: int = 160) -> dict:
    """Least-squares A, B, C_mid of ``curve`` through points (C [N] > 0, R [N]) with R0 fixed.

    C_mid is searched on a log grid from mid_range[0] times the smallest C to mid_range[1] times the
    largest, B on ``B_GRID``; A in [R0, 1]. Returns {"A", "B", "C_mid", "rmse", "at_edge"}: at_edge
    is True when the best C_mid or B lies on its grid's edge or A on 1 (the data do not pin the
    curve: it has not bent yet, or is flat).
    """
    C = torch.as_tensor(C, dtype=torch.float64)
    R = torch.as_tensor(R, dtype=torch.float64)
    if C.ndim != 1 or C.shape != R.shape or len(C) < 3:
        raise ValueError(f"C and R must be 1-D of one length >= 3, got {tuple(C.shape)} and {tuple(R.shape)}")
    if not bool((C > 0).all()):
        raise ValueError("C must be > 0 (compute spent; drop the point before training)")
    mids = torch.logspace(math.log10(mid_range[0] * float(C.min())), math.log10(mid_range[1] * float(C.max())),
                          n_mid, dtype=torch.float64)
    s = 1.0 / (1.0 + (mids[:, None, None] / C) ** B_GRID[None, :, None])        # [M, Bg, N]
    y = R - R0                                                                   # [N]
    k = (s * y).sum(-1) / (s * s).sum(-1).clamp_min(1e-300)                      # [M, Bg]: A - R0
    k = k.clamp(0.0, 1.0 - R0)
    sse = ((k[..., None] * s - y) ** 2).sum(-1)                                  # [M, Bg]
    i = int(sse.argmin())
    im, ib = divmod(i, len(B_GRID))
    return {"A": R0 + float(k[im, ib]), "B": float(B_GRID[ib]), "C_mid": float(mids[im]),
            "rmse": math.sqrt(float(sse[im, ib]) / len(C)),
            "at_edge": im in (0, n_mid - 1) or ib in (0, len(B_GRID) - 1) or float(k[im, ib]) >= 1.0 - R0}


def compute_axis(h, *, batch: int) -> tuple[list, list]:
    """(steps, compute) of a stored run: the response tokens sampled up to each logged step,
    ``batch`` responses per step times the logged mean length (``len/all``), each logged row standing
    for the steps since the previous one (stored runs log every 2nd step)."""
    steps, lens = h.series("len/all")
    out, total, prev = [], 0.0, 0
    for s, n in zip(steps, lens):
        total += (s - prev) * batch * n
        prev = s
        out.append(total)
    return steps, out


def fit_run(h, *, batch: int, key: str = "acc/heldout") -> dict:
    """``fit_curve`` of a run's ``key`` (held-out accuracy) against ``compute_axis``; R0 is the
    step-0 accuracy (before RL)."""
    steps, comp = compute_axis(h, batch=batch)
    at = dict(zip(steps, comp))
    ev_steps, acc = h.series(key)
    R0 = acc[ev_steps.index(0)] if 0 in ev_steps else None
    if R0 is None:
        raise ValueError(f"the run logs no {key} at step 0 (the accuracy before RL, R0)")
    pts = [(at[s], a) for s, a in zip(ev_steps, acc) if s > 0 and s in at]
    if len(pts) < 3:
        raise ValueError(f"the run logs {key} at {len(pts)} steps after 0 that also log len/all; the fit needs 3")
    C, R = zip(*pts)
    return {**fit_curve(C, R, R0), "R0": R0}


def fit_runs(runs: dict, *, batch: int) -> dict:
    """{label: [fit_run per seed]} for stored runs {label: [History per seed]} of ``batch`` responses a step."""
    return {label: [fit_run(h, batch=batch) for h in hists] for label, hists in runs.items()}

