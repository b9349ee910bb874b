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
def batch_std_advantages(rewards: Tensor, group_size: int, *, eps: float = 1e-6) -> Tensor:
    """The group mean subtracted, the *batch's* reward std dividing. rewards [B] -> adv [B].

    A_i = (R_i - mean(group)) / (std(R over the batch) + eps), Bessel-corrected: TRL's
    ``scale_rewards="batch"`` and ScaleRL's batch-level normalisation. Differs from GRPO in the
    divisor: one number for every group, so a group with a small spread keeps small advantages.
    A group whose rewards are all equal gets exactly 0.
    """
    r_grp = _groups(rewards, group_size)                        # [P, G]
    check_eps(eps, "eps")
    adv_grp = (r_grp - r_grp.mean(dim=1, keepdim=True)) / (rewards.std() + eps)
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


# ----------------------------------------------------------------------------------------------
# the other estimators verl 0.9.1 can select (algorithm.adv_estimator); each a diff of a parent
# ----------------------------------------------------------------------------------------------
@torch.no_grad()
def last_token_rewards(rewards: Tensor, mask: Tensor) -> Tensor:
    """An outcome reward per response [B] placed on its last valid token: [B, T] (verl's
    token_level_rewards for a verifier reward)."""
    check_tensor(rewards, "rewards", ndim=1, floating=True)
    check_tensor(mask, "mask", ndim=2)
    last = (mask.long().cumsum(-1) == mask.sum(-1, keepdim=True)) & mask         # [B, T]
    return torch.where(last, rewards[:, None], torch.zeros((), dtype=rewards.dtype))


@torch.no_grad()
def whiten(values: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the valid tokens of the whole batch [B, T] -> [B, T].

    Token-weighted: a response of 100 tokens counts 100 times in the mean and the (Bessel-corrected)
    variance. Padding comes out 0. verl's masked_whiten, used by REINFORCE++, GDPO and (verl only) GAE.
    """
    check_token_inputs(mask, values=values)
    n = mask.sum()
    if n < 2:
        raise ValueError(f"whitening needs at least 2 valid tokens, got {int(n)}")
    x = zero_padding(values, mask)
    mean = x.sum() / n
    var = zero_padding((x - mean) ** 2, mask).sum() / (n - 1)
    return zero_padding((x - mean) * torch.rsqrt(var + eps), mask)


@torch.no_grad()
def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """G_t = r_t + gamma G_{t+1} over valid tokens [B, T]; a masked stretch inside a response
    carries G through unchanged; 0 on padding."""
    check_token_inputs(mask, rewards=rewards)
    check_number(gamma, "gamma", ge=0, le=1)
    rewards = zero_padding(rewards, mask)
    out = torch.zeros_like(rewards)
    running = rewards.new_zeros(rewards.shape[0])                                # [B]
    for t in reversed(range(rewards.shape[1])):
        new = rewards[:, t] + gamma * running
        running = torch.where(mask[:, t], new, running)
        out[:, t] = torch.where(mask[:, t], new, torch.zeros_like(new))
    return out


@torch.no_grad()
def reinforce_pp_advantages(rewards: Tensor, mask: Tensor, *, gamma: float = 1.0) -> Tensor:
    """REINFORCE++ (Hu 2025, arXiv 2501.03262): returns-to-go whitened over the batch. [B, T] -> [B, T].

    Differs from GRPO in the baseline and the scale: no per-group mean at all; the batch's token
    mean and std (``whiten``) play both roles. rewards are token rewards [B, T] (an outcome reward
    on the last token: ``last_token_rewards``; verl adds the per-token KL penalty there when
    use_kl_in_reward). Read from verl 0.9.1 core_algos.compute_reinforce_plus_plus_outcome_advantage
    (gamma: algorithm.gamma, default 1.0).
    """
    return whiten(discounted_returns(rewards, mask, gamma), mask)


@torch.no_grad()
def reinforce_pp_baseline_advantages(rewards: Tensor, mask: Tensor, group_size: int) -> Tensor:
    """REINFORCE++-baseline (arXiv 2501.03262): R_i - mean(group), then whitened over the batch's
    tokens. rewards [B], mask [B, T] -> adv [B, T].

    Differs from Dr. GRPO (R_i - mean) in the scale: the std is the batch's, token-weighted,
    not the group's. Read from verl 0.9.1
    core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage.
    """
    centred = dr_grpo_advantages(rewards, group_size)                           # [B]
    check_tensor(mask, "mask", ndim=2)
    return whiten(centred[:, None].expand(mask.shape), mask)                    # [B, T]


@torch.no_grad()
def remax_advantages(rewards: Tensor, baseline: Tensor, mask: Tensor) -> Tensor:
    """ReMax (Li et al. 2023, arXiv 2310.10505): return-to-go minus the reward of the greedy answer.

    rewards [B, T] token rewards, baseline [B] (the reward of the greedy response to the same
    prompt) -> adv [B, T], 0 on padding. Differs from REINFORCE++ in the baseline: one extra greedy
    sample per prompt instead of batch statistics; no scaling. Read from verl 0.9.1
    core_algos.compute_remax_outcome_advantage (gamma 1).
    """
    check_tensor(baseline, "baseline", ndim=1, floating=True)
    returns = discounted_returns(rewards, mask, 1.0)                            # [B, T]
    return zero_padding(returns - baseline[:, None], mask)


@torch.no_grad()
def opo_advantages(rewards: Tensor, group_size: int, lengths: Tensor) -> Tensor:
    """OPO (arXiv 2505.23585): R_i minus the length-weighted group mean sum_j |y_j| R_j / sum_j |y_j|.

    rewards [B], lengths [B] (valid tokens per response) -> adv [B]. Differs from Dr. GRPO in the
    baseline's weights: by length (the paper's claim: the variance-minimising baseline when the
    loss sums over tokens). Read from verl 0.9.1 core_algos.compute_opo_outcome_advantage.
    """
    r_grp = _groups(rewards, group_size)                                        # [P, G]
    check_tensor(lengths, "lengths", ndim=1)
    L = lengths.to(r_grp.dtype).view_as(r_grp)                                  # [P, G]
    base = (L * r_grp).sum(dim=1, keepdim=True) / L.sum(dim=1, keepdim=True).clamp_min(1)
    return _zero_without_signal(r_grp - base, r_grp).reshape(-1)               # [B]


@torch.no_grad()
def passk_advantages(rewards: Tensor, group_size: int, *, scale: bool = True,
                     eps: float = 1e-6) -> Tensor:
    """Pass@k advantage (arXiv 2503.19595): only each group's best response gets R_max - R_second,
    divided by std(R) + eps when ``scale``; every other response gets 0. [B] -> [B].

    Differs from GRPO in the baseline: the runner-up instead of the mean, and only the winner
    learns. Ties for the best go to the first. Read from verl 0.9.1
    core_algos.compute_grpo_passk_outcome_advantage (scale: norm_adv_by_std_in_grpo).
    """
    r_grp = _groups(rewards, group_size)                                        # [P, G]
    check_eps(eps, "eps")
    top2 = r_grp.topk(2, dim=1).values                                          # [P, 2]
    gap = top2[:, :1] - top2[:, 1:]                                             # [P, 1]
    if scale:
        gap = gap / (r_grp.std(dim=1, keepdim=True) + eps)
    best = torch.zeros_like(r_grp, dtype=torch.bool)
    best[torch.arange(len(r_grp)), r_grp.argmax(dim=1)] = True
    return torch.where(best, gap.expand_as(r_grp), torch.zeros_like(r_grp)).reshape(-1)


@torch.no_grad()
def gpg_advantages(rewards: Tensor, group_size: int, *, f_norm: float = 1.0) -> Tensor:
    """GPG's advantage (Chu et al. 2025): alpha (R_i - mean(group)) / f_norm. [B] -> [B].

    Differs from Dr. GRPO by the factor alpha = B / (number of nonzero rewards in the batch),
    which rescales the gradient up when few responses score. Read from verl 0.9.1
    core_algos.compute_gpg_outcome_advantage, which counts nonzero *rewards* (not nonzero
    advantages) and uses f_norm = 1.
    """
    check_number(f_norm, "f_norm", gt=0)
    centred = dr_grpo_advantages(rewards, group_size)                          # [B]
    alpha = rewards.numel() / (rewards != 0).sum().clamp_min(1).to(rewards.dtype)      # float64 stays float64
    return alpha * centred / f_norm


@torch.no_grad()
def gdpo_advantages(rewards: Tensor, group_size: int, mask: Tensor, *, weights=None,
                    scale: bool = True, eps: float = 1e-6) -> Tensor:
    """GDPO (arXiv 2601.05242): GRPO-normalise each reward component in its group, sum them with
    ``weights``, whiten the sum over the batch's tokens. rewards [B, K], mask [B, T] -> adv [B, T].

    Differs from GRPO on a summed reward in the order: normalise, then sum, so a component with a
    small spread is not drowned by one with a large spread. Read from verl 0.9.1
    core_algos.compute_gdpo_outcome_advantage (algorithm.gdpo_reward_keys/_weights).
    """
    check_tensor(rewards, "rewards", ndim=2, floating=True)
    K = rewards.shape[1]
    w = torch.ones(K, dtype=rewards.dtype) if weights is None else torch.as_tensor(weights, dtype=rewards.dtype)
    if w.shape != (K,):
        raise ValueError(f"weights must have one entry per reward component ({K}), got {tuple(w.shape)}")
    total = sum(w[k] * group_advantages(rewards[:, k].contiguous(), group_size, scale=scale, eps=eps)
                for k in range(K))                                              # [B]
    return whiten(total[:, None].expand(mask.shape), mask)


@torch.no_grad()
def _otb(rewards, mask, group_size, old_logp, sum_pi_sq, is_weight, zero_tail, eps, by_valid_index):
    check_token_inputs(mask, rewards=rewards, old_logp=old_logp, sum_pi_sq=sum_pi_sq, is_weight=is_weight)
    check_int(group_size, "group_size", at_least=2)
    returns = discounted_returns(rewards, mask, 1.0)                            # [B, T] G_t
    w = 1 - 2 * torch.exp(zero_padding(old_logp, mask)) + zero_padding(sum_pi_sq, mask)
    if is_weight is not None:
        w = w * zero_padding(is_weight, mask) ** 2
    W = zero_padding(w, mask).cumsum(dim=-1)                                   # [B, T] W_t
    if by_valid_index:              # compact each row's valid tokens to the left: step k = k-th valid token
        order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)     # [B, T]
        returns, W, m = returns.gather(-1, order), W.gather(-1, order), mask.gather(-1, order)
    else:
        m = mask
    B, T = mask.shape
    Gg, Wg, mg = (x.view(-1, group_size, T) for x in (returns, W, m))          # [P, G, T]
    base = (Gg * Wg * mg).sum(1, keepdim=True) / ((Wg * mg).sum(1, keepdim=True) + eps)   # [P, 1, T]
    base = base.expand(-1, group_size, -1).clone()                             # [P, G, T]
    if zero_tail:                   # a group's unique longest response: no baseline past the runner-up
        n = mg.sum(-1)                                                         # [P, G]
        top2 = n.topk(2, dim=1).values                                         # [P, 2]
        for p in range(n.shape[0]):
            longest = (n[p] == top2[p, 0]).nonzero()[:, 0]
            if len(longest) == 1 and top2[p, 0] > top2[p, 1]:
                base[p, longest[0], int(top2[p, 1]):] = 0
    adv = (Gg - base).reshape(B, T)
    if by_valid_index:
        adv = torch.empty_like(adv).scatter_(-1, order, adv)                   # back to the positions
    return zero_padding(adv, mask)


def optimal_token_baseline_advantages(rewards: Tensor, mask: Tensor, group_size: int, old_logp: Tensor,
                                      sum_pi_sq: Tensor, *, is_weight: Tensor | None = None,
                                      zero_tail: bool = True, eps: float = 1e-8) -> Tensor:
    """Optimal token baseline: A_t = G_t - B_t with one baseline per position t of each group,
    B_t = sum_i G_it W_it / sum_i W_it, W_it = sum_{j<=t} (1 - 2 pi_ij + sum_v pi_v^2). [B, T] -> [B, T].

    Differs from the group mean (RLOO, Dr. GRPO) in the baseline: per token, weighted by each
    path's accumulated squared logit-gradient norm (W), the variance-minimising choice. rewards
    [B, T] token rewards; old_logp the sampled tokens' log-probs; sum_pi_sq = sum over the vocabulary
    of pi^2 at each step; is_weight (optional) multiplies w by its square. ``zero_tail``: a group's
    unique longest response gets no baseline past the second-longest length. Read from verl 0.9.1
    core_algos.compute_optimal_token_baseline_advantage (verl's step t is the padded position).
    """
    return _otb(rewards, mask, group_size, old_logp, sum_pi_sq, is_weight, zero_tail, eps, False)


def tir_optimal_token_baseline_advantages(rewards: Tensor, mask: Tensor, group_size: int,
                                          old_logp: Tensor, sum_pi_sq: Tensor, *,
                                          is_weight: Tensor | None = None, zero_tail: bool = True,
                                          eps: float = 1e-8) -> Tensor:
    """The optimal token baseline for multi-turn (tool) responses: step t is a row's t-th *valid*
    token, so a masked tool output inside a response does not shift its later tokens' baseline.

    Differs from ``optimal_token_baseline_advantages`` only there; on right-padded responses without
    holes the two are equal. Read from verl 0.9.1
    core_algos.compute_multi_turn_optimal_token_baseline_advantage.
    """
    return _otb(rewards, mask, group_size, old_logp, sum_pi_sq, is_weight, zero_tail, eps, True)
