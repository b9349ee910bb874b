"""Advantage estimators: rewards [B] -> advantages [B], and GAE for per-token rewards.

Groups are contiguous: rows g*G ... g*G+G-1 answer the same prompt (B = P * G).
Advantages are constants of the loss: every function here runs without gradient.
Used by chapter 01 (GAE), chapter 02 (group advantages) and the toy trainer (chapter 07).
"""
from __future__ import annotations

import torch
from torch import Tensor

from .masking import check_eps, check_int, check_number, check_tensor, check_token_inputs, zero_padding


def _groups(rewards, group_size, *, min_size: int = 2) -> Tensor:
    """Validate and reshape rewards [B] -> [P, G]."""
    check_tensor(rewards, "rewards", ndim=1, floating=True)
    check_int(group_size, "group_size", at_least=min_size)
    if rewards.numel() % group_size:
        raise ValueError(f"rewards has B={rewards.numel()} entries, which group_size={group_size} "
                         "does not divide (B must be P * G with contiguous groups)")
    return rewards.detach().view(-1, group_size)               # [P, G]


def _has_signal(r_grp: Tensor) -> Tensor:
    """bool [P, 1]: True where the group's rewards are not all equal."""
    return (r_grp != r_grp[:, :1]).any(dim=1, keepdim=True)


def _zero_without_signal(adv_grp: Tensor, r_grp: Tensor) -> Tensor:
    """adv [P, G] with every all-equal group set to exactly 0 (not a rounding residue / eps)."""
    return torch.where(_has_signal(r_grp), adv_grp, torch.zeros_like(adv_grp))


def signal_groups(rewards: Tensor, group_size: int) -> Tensor:
    """Which groups carry a learning signal: bool [P], False where all G rewards are equal.

    A group with identical rewards gets advantage 0 for every response under GRPO, Dr. GRPO and
    RLOO; DAPO's dynamic sampling drops such groups and samples more prompts (DAPO §3.2).
    """
    return _has_signal(_groups(rewards, group_size, min_size=1))[:, 0]    # [P]


@torch.no_grad()
def group_advantages(rewards: Tensor, group_size: int, *, scale: bool = True,
                     eps: float = 1e-6) -> Tensor:
    """GRPO group-relative advantage. rewards [B] -> adv [B].

    A_i = (R_i - mean(R)) / (std(R) + eps) with the Bessel-corrected std, as in verl (torch.std)
    and TRL (its own NaN-aware nanstd, with the same count / (count - 1) correction).
    scale=False is Dr. GRPO: subtract the group mean, no std.
    A group whose rewards are all equal gets exactly 0 (no signal), not a rounding residue / eps.
    """
    r_grp = _groups(rewards, group_size)                        # [P, G]
    check_eps(eps, "eps")
    adv_grp = r_grp - r_grp.mean(dim=1, keepdim=True)           # [P, G]
    if scale:
        adv_grp = adv_grp / (r_grp.std(dim=1, keepdim=True) + eps)
    return _zero_without_signal(adv_grp, r_grp).reshape(-1)     # [B]


@torch.no_grad()
def dr_grpo_advantages(rewards: Tensor, group_size: int) -> Tensor:
    """Dr. GRPO advantage R_i - mean(R). rewards [B] -> adv [B]. Differs from GRPO: no std."""
    return group_advantages(rewards, group_size, scale=False)


@torch.no_grad()
def rloo_advantages(rewards: Tensor, group_size: int) -> Tensor:
    """RLOO: each reward minus the mean of the *other* G-1 rewards of its group. [B] -> [B].

    Exactly G/(G-1) times the Dr. GRPO advantage (rlhf-book ch. 6).
    """
    r_grp = _groups(rewards, group_size)                        # [P, G]
    others_mean = (r_grp.sum(dim=1, keepdim=True) - r_grp) / (group_size - 1)   # [P, G]
    return _zero_without_signal(r_grp - others_mean, r_grp).reshape(-1)     # [B]


def signal_probability(pass_rate, group_size: int) -> Tensor:
    """Chance that a group of G independent 0/1 rewards with success rate p is not all-equal.

    P(signal) = 1 - p^G - (1-p)^G. Accepts a float or a tensor of rates in [0, 1].
    """
    p = torch.as_tensor(pass_rate, dtype=torch.float64)
    if ((p < 0) | (p > 1)).any():
        raise ValueError(f"pass_rate must lie in [0, 1], got {pass_rate!r}")
    check_int(group_size, "group_size")
    return 1 - p ** group_size - (1 - p) ** group_size


def samples_per_useful_group(pass_rate, group_size: int) -> Tensor:
    """Expected responses drawn per group that carries signal: G / P(signal) (inf when P = 0)."""
    return group_size / signal_probability(pass_rate, group_size)


@torch.no_grad()
def gae(rewards: Tensor, values: Tensor, mask: Tensor, *, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation. rewards, values, mask [B, T] -> (adv, returns) [B, T].

    delta_t = R_t + gamma * V_{t+1} - V_t,  A_t = delta_t + gamma * lam * A_{t+1}, returns = A + V
    (R_t: the reward of token t; r is the ratio throughout the course).
    Nothing is bootstrapped past the last valid token of a row (V and A after it count as 0), and
    padded positions carry the running values through unchanged (verl's form), so a masked
    position inside a response (a tool output) is skipped rather than treated as an end.
    Advantages and returns are 0 on padding.
    """
    check_token_inputs(mask, rewards=rewards, values=values)
    check_number(gamma, "gamma", ge=0, le=1)
    check_number(lam, "lam", ge=0, le=1)
    rewards, values = zero_padding(rewards, mask), zero_padding(values, mask)
    B, T = rewards.shape
    next_value = rewards.new_zeros(B)                           # [B] V(s_{t+1}); 0 past the end
    next_adv = rewards.new_zeros(B)                             # [B] A_{t+1}
    adv = torch.zeros_like(rewards)
    for t in reversed(range(T)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        a_t = delta + gamma * lam * next_adv
        valid = mask[:, t]
        adv[:, t] = torch.where(valid, a_t, torch.zeros_like(a_t))
        next_value = torch.where(valid, values[:, t], next_value)
        next_adv = torch.where(valid, a_t, next_adv)
    return adv, zero_padding(adv + values, mask)                # returns = A + V
