"""Step 1 of an RL step, what sampling hands to learning: the ``Batch`` of whole groups, every response
drawn (``Collected``), the shaped reward, DAPO's dynamic-sampling filter, and the sampling metrics.

``trainer.collect`` draws the responses and calls these.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .. import advantages, rewards
from .config import RunConfig


@dataclass
class Batch:
    """What one update learns from: whole groups of G responses, contiguous. B = n_groups * G."""
    prompts: Tensor         # [B, Lp]
    responses: Tensor       # [B, T] the pad id after the EOS
    mask: Tensor            # [B, T] bool
    rollout_logp: Tensor    # [B, T] log-probs under the sampler (0 on padding)
    rewards: Tensor         # [B] shaped rewards (correctness + overlong penalty)
    eos_id: int             # the policy's end and padding ids
    pad_id: int


@dataclass
class Collected:
    """One step's sampling: the batch to learn from and every response drawn for it."""
    batch: Batch | None     # None when dynamic sampling kept no group
    rewards: Tensor         # [N] shaped rewards of every response drawn (N = rounds * P * G)
    correct: Tensor         # [N] 0/1 correctness
    lengths: Tensor         # [N] response lengths (tokens, EOS included)
    truncated: Tensor       # [N] bool: the response reached the budget without an EOS
    seconds: float          # wall time inside the sampler
    tokens: int             # sampled token slots
    flops: float            # model FLOPs of sampling
    categories: dict = field(default_factory=dict)   # name -> [N] 0/1, when the task sorts its replies


def shaped_rewards(cfg: RunConfig, passed: Tensor, lengths: Tensor, formatted: Tensor | None = None) -> Tensor:
    """The reward the advantage sees: the verifier's 0/1, plus ``format_weight`` times the format
    verdict ``formatted`` (a second reward term), plus DAPO's overlong penalty when enabled, plus
    ``length_bonus`` per response token (a misconfiguration chapter 08 studies)."""
    out = passed.clone()
    if cfg.format_weight:
        if formatted is None:
            raise ValueError("format_weight is set: shaped_rewards needs the format verdicts (formatted)")
        out = out + cfg.format_weight * formatted.to(out.dtype)
    if cfg.overlong_penalty:
        out = out + rewards.overlong_penalty(lengths, cfg.max_new_tokens, cfg.overlong_cache)   # DAPO Eq. 13
    if cfg.length_bonus:
        out = out + cfg.length_bonus * lengths.to(out.dtype)
    return out


def select_groups(rolls: list, round_rewards: list, n_groups: int, G: int, *, filter_signal: bool,
                  eos_id: int, pad_id: int):
    """The first ``n_groups`` groups of the rounds' rollouts (with ``filter_signal``: only groups
    whose rewards are not all equal, DAPO §3.2) as one Batch, or None when none is kept. ``eos_id``,
    ``pad_id``: the policy's."""
    if not filter_signal and len(rolls) == 1:           # everything kept: no gather (a sync on a GPU)
        ro, r = rolls[0], round_rewards[0]
        cut = n_groups * G
        return Batch(ro.prompts[:cut], ro.responses[:cut], ro.mask[:cut], ro.rollout_logp[:cut], r[:cut],
                     eos_id, pad_id)
    keep = [advantages.signal_groups(r, G).repeat_interleave(G) if filter_signal
            else torch.ones_like(r, dtype=torch.bool) for r in round_rewards]       # [B] per round
    n_keep = min(sum(int(k.sum()) for k in keep) // G, n_groups)
    if n_keep == 0:
        return None
    cut = n_keep * G
    return Batch(prompts=torch.cat([ro.prompts[k] for ro, k in zip(rolls, keep)])[:cut],
                 responses=_pad_cat([ro.responses[k] for ro, k in zip(rolls, keep)], pad_id)[:cut],
                 mask=_pad_cat([ro.mask[k] for ro, k in zip(rolls, keep)], False)[:cut],
                 rollout_logp=_pad_cat([ro.rollout_logp[k] for ro, k in zip(rolls, keep)], 0.0)[:cut],
                 rewards=torch.cat([r[k] for r, k in zip(round_rewards, keep)])[:cut], eos_id=eos_id, pad_id=pad_id)


def _pad_cat(tensors: list, value) -> Tensor:
    """Concatenate [B_i, T_i] tensors along B, right-padding each to the largest T with value."""
    T = max(t.shape[1] for t in tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, T - t.shape[1]), value=value) for t in tensors])


def _mean_where(x: Tensor, m: Tensor) -> Tensor:
    """Mean of x [N] over m [N] bool without a gather (NaN when m is empty); x holds whole numbers
    here, so the sum is exact and the value is that of x[m].mean()."""
    m = m.to(x.dtype)
    return (x * m).sum() / m.sum()


def sampling_metrics(c: Collected, G: int) -> dict:
    """Metrics of everything drawn this step (before the filter); tensors, read back with the step's."""
    rew, cor, lens = c.rewards, c.correct, c.lengths.float()
    n_groups = len(rew) // G
    return {"reward/mean": rew.mean(), "acc/sampled": cor.mean(), "len/all": lens.mean(),
            "len/correct": _mean_where(lens, cor > 0), "len/wrong": _mean_where(lens, cor == 0),
            "groups/zero_signal_frac": 1.0 - advantages.signal_groups(rew, G).double().sum() / n_groups,
            "reward/group_std": rew.view(-1, G).std(dim=1).mean(),
            "len/truncated_frac": c.truncated.float().mean(),
            "samples/step": len(rew), "time/sample_s": c.seconds,
            "speed/sample_tok_s": c.tokens / max(c.seconds, 1e-9), "flops/sample": c.flops,
            **{f"replies/{name}": v.float().mean() for name, v in c.categories.items()}}
