"""The policy a config trains (its task's vocabulary and context) and its greedy accuracy on prompts."""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .config import ToyConfig
from .device import stop_check_every
from .policy import Policy, compute_precision
from ..toy.policy import TinyGPT
from ..toy.task import correctness, make_task


def build_model(cfg: ToyConfig, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> Policy:
    """The policy the config names (``cfg.policy``) on ``device``: a TinyGPT sized for its task (its vocabulary,
    its prompt plus the generation budget), or the real chat model (``lm.policy``, loaded pretrained there)."""
    if cfg.policy == "smollm2":
        from ..lm.policy import build_policy
        return build_policy(dtype, device)
    task = make_task(cfg)
    return TinyGPT(cfg.n_layer, cfg.d_model, cfg.n_head, block_size=task.prompt_len + cfg.max_new_tokens,
                   dtype=dtype, vocab_size=task.vocab_size).to(device)


@torch.no_grad()
def heldout_accuracy(model: Policy, prompts: Tensor, max_new_tokens: int, precision: str = "fp32",
                     verifier: Callable[[Tensor, Tensor], Tensor] | None = None) -> float:
    """Greedy-decoding accuracy on the given prompts, by ``verifier`` (default: the addition task's
    exact check)."""
    with compute_precision(precision, prompts.device):
        roll = model.rollout(prompts, max_new_tokens, greedy=True, stop_check_every=stop_check_every(prompts.device))
    return float((verifier or correctness)(prompts, roll.responses).mean())
