"""The policy a config trains (by name, from ``registry.POLICIES``) and its greedy accuracy on prompts."""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .config import RunConfig
from .device import stop_check_every
from .policy import Policy, compute_precision
from .registry import policy_class


def build_model(cfg: RunConfig, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> Policy:
    """The policy the config names (``cfg.policy``), built for its task on ``device`` (``Policy.for_config``:
    the toy's TinyGPT sized for its task's vocabulary and context, freshly initialised; the real chat model
    loaded pretrained)."""
    return policy_class(cfg.policy).for_config(cfg, dtype, torch.device(device))


@torch.no_grad()
def heldout_accuracy(model: Policy, prompts: Tensor, max_new_tokens: int, precision: str,
                     verifier: Callable[[Tensor, Tensor], Tensor]) -> float:
    """Greedy-decoding accuracy on the given prompts, by ``verifier`` (a task's ``verifiers["exact"]``)."""
    with compute_precision(precision, prompts.device):
        roll = model.rollout(prompts, max_new_tokens, greedy=True, stop_check_every=stop_check_every(prompts.device))
    return float(verifier(prompts, roll.responses).mean())
