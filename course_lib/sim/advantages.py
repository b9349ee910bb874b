"""Chapter 02's estimator table: every advantage estimator verl 0.9.1 selects, on one group of
responses with given rewards and lengths, as a token-level advantage [B, T].

Each entry calls the estimator in ``course_lib.advantages``; the inputs the group's rewards and
lengths do not fix (the greedy answer's reward for ReMax, a second reward component for GDPO, the
old token probabilities for the optimal token baseline) are arguments, stated in the chapter.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .. import advantages as adv_lib
from ..aggregation import token_weights
from .aggregation import length_mask


def estimator_advantages(rewards: Sequence[float], lengths: Sequence[int], *, greedy_reward: float,
                         second_reward: Sequence[float], p_token: float = 0.5,
                         sum_pi_sq: float = 0.5) -> tuple[dict[str, Tensor], Tensor]:
    """name -> advantage [B, T] (float64, 0 on padding) for one group (G = B), and the mask [B, T].

    greedy_reward: ReMax's baseline (the reward of the greedy answer). second_reward [B]: GDPO's
    second reward component (the first is ``rewards``). p_token, sum_pi_sq: every token's old
    probability and sum_v pi_v^2, the optimal token baseline's inputs (constant here, so its
    per-token weight w = 1 - 2 p + sum pi^2 is the same for every token).
    """
    r = torch.as_tensor(rewards, dtype=torch.float64)                          # [B]
    mask = length_mask(lengths)                                                # [B, T]
    G = len(r)
    L = mask.sum(dim=1)                                                        # [B]
    seq = lambda a: torch.where(mask, a[:, None].to(torch.float64), torch.zeros((), dtype=torch.float64))
    tok_r = adv_lib.last_token_rewards(r, mask)                                # [B, T]
    two = torch.stack([r, torch.as_tensor(second_reward, dtype=torch.float64)], dim=1)   # [B, 2]
    full = lambda v: torch.full(mask.shape, v, dtype=torch.float64)
    out = {
        "GRPO": seq(adv_lib.group_advantages(r, G)),
        "Dr. GRPO": seq(adv_lib.dr_grpo_advantages(r, G)),
        "RLOO": seq(adv_lib.rloo_advantages(r, G)),
        "REINFORCE++": adv_lib.reinforce_pp_advantages(tok_r, mask),
        "REINFORCE++-baseline": adv_lib.reinforce_pp_baseline_advantages(r, mask, G),
        "ReMax": adv_lib.remax_advantages(tok_r, torch.full((G,), float(greedy_reward), dtype=torch.float64), mask),
        "OPO": seq(adv_lib.opo_advantages(r, G, L)),
        "pass@k": seq(adv_lib.passk_advantages(r, G)),
        "GPG": seq(adv_lib.gpg_advantages(r, G)),
        "GRPO on the summed reward": seq(adv_lib.group_advantages(two.sum(dim=1), G)),
        "GDPO": adv_lib.gdpo_advantages(two, G, mask),
        "optimal token baseline": adv_lib.optimal_token_baseline_advantages(
            tok_r, mask, G, full(float(torch.tensor(p_token).log())), full(sum_pi_sq)),
    }
    return out, mask


def estimator_rows(advs: dict[str, Tensor], mask: Tensor, positions: Sequence[int] = (0,)) -> list[list]:
    """[name, A at each position of each response..., whole-response weight under token-mean...]:
    the weight a response gets is sum_t alpha_t A_t with alpha from ``aggregation.token_weights``."""
    alpha = token_weights(mask, "token-mean")                                  # [B, T]
    rows = []
    for name, a in advs.items():
        at = [float(a[i, t]) + 0.0 for t in positions for i in range(len(a))]
        whole = (alpha * a).sum(dim=1)                                         # [B]
        rows.append([name, *at, *[float(w) + 0.0 for w in whole]])
    return rows
