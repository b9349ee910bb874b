"""The trainer's seam on the policy side: what ``train`` reads from a policy, each hook declared once with its
default (``Policy``), and what every policy shares: the sampled batch (``Rollout``), the arithmetic of the
forward passes (``compute_precision``) and the learner's log-probs (``response_logits``, ``token_logp``).

The policies subclass ``Policy``: the toy's ``toy.policy.TinyGPT`` and the real model's ``lm.policy.ChatPolicy``.
"""
from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch import Tensor


class Policy(nn.Module):
    """A policy the trainer trains: an ``nn.Module`` whose parameters train and whose call
    ``policy(prompts, continuation=responses[:, :-1])`` is the learner's forward, the logits ``[B, T, V]`` that
    predict each response token. A subclass sets ``eos_id`` and ``pad_id`` (the ids that end and pad its
    responses) and implements ``forward``, ``rollout`` and ``flops_per_token``; every other hook the trainer
    calls is declared here with its default."""
    eos_id: int
    pad_id: int
    # the trainer hands the memory a step freed back to the system after each step (``rl.device``)
    returns_freed_memory: bool = False
    # rows per forward without gradient (the trainer's targets); None: the whole batch in one forward
    score_rows: int | None = None
    # the run config's plug-in fields this policy reads (``RunConfig``: a run stores them, no other policy sets them)
    config_fields: tuple[str, ...] = ()
    # the registered policy whose token ids this one reads and writes (a task names it); None: its own name
    token_ids: str | None = None

    def forward(self, prompts: Tensor, cache=None, *, continuation: Tensor | None = None) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement the learner's forward")

    def rollout(self, prompts: Tensor, max_new_tokens: int, *, temperature: float = 1.0, greedy: bool = False,
                generator: torch.Generator | None = None, logits_noise: float = 0.0,
                stop_check_every: int = 1) -> "Rollout":
        """Sample one response per prompt row ``[B, Lp]`` -> a ``Rollout``."""
        raise NotImplementedError(f"{type(self).__name__} must implement rollout")

    def flops_per_token(self, context: float, backward: bool = True) -> float:
        """Model FLOPs per token at a context length, forward only or with the backward."""
        raise NotImplementedError(f"{type(self).__name__} must implement flops_per_token")

    @classmethod
    def for_config(cls, cfg, dtype: torch.dtype, device: torch.device) -> "Policy":
        """The policy a run config asks for (its task, sizes), on ``device``, before any training."""
        raise NotImplementedError(f"{cls.__name__} must implement for_config")

    @classmethod
    def initial(cls, cfg, device: torch.device, dtype: torch.dtype = torch.float32, *,
                progress: bool = False) -> tuple["Policy", dict, float]:
        """The policy RL starts from -> (policy on ``device``, its state_dict, seconds to get it); by default
        ``for_config``'s as it is (a pretrained model). A policy that needs a warm start runs it here."""
        t0 = time.perf_counter()
        policy = cls.for_config(cfg, dtype, device)
        return policy, policy.state_dict(), time.perf_counter() - t0

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters the optimiser updates and the gradient clip measures; by default every parameter that
        requires a gradient."""
        return [p for p in self.parameters() if p.requires_grad]

    def reference(self) -> nn.Module:
        """pi_ref, frozen at the policy's starting weights; by default a copy kept in memory. A policy may offer
        something lighter (the real model reloads its pretrained weights when a step needs them): whatever it
        returns is called as the policy is and has ``release()``, and ``state_dict()`` / ``load_state_dict()`` for
        a checkpoint (empty where the weights are reloaded from elsewhere)."""
        return copy.deepcopy(self).requires_grad_(False)

    def release(self) -> None:
        """Called on pi_ref once a step has scored with it: drop what it need not hold through the update (by
        default nothing)."""


PRECISIONS = ("fp32", "tf32", "bf16")


@contextlib.contextmanager
def compute_precision(precision: str, device: torch.device):
    """The arithmetic of the forward passes run inside the block; weights, gradients and optimiser
    state stay float32 whatever it is.

    "fp32": plain float32 matmuls; "tf32": float32 matmuls on CUDA tensor cores (10-bit mantissa
    products, float32 sums; CUDA only: a CPU has no TF32); "bf16": autocast to bfloat16 (matmuls
    and attention in bfloat16, which both CUDA and CPU run; reductions such as LayerNorm and the
    log-softmax of the logits stay float32, see ``full_precision``).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "tf32" and device.type != "cuda":
        raise ValueError(f"precision='tf32' needs a CUDA device (TF32 is a tensor-core format), got "
                         f"device {device}; on a CPU use 'fp32' or 'bf16'")
    with contextlib.ExitStack() as stack:
        if device.type == "cuda":
            before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
            stack.callback(lambda: (setattr(torch.backends.cuda.matmul, "allow_tf32", before[0]),
                                    setattr(torch.backends.cudnn, "allow_tf32", before[1])))
        if precision == "bf16":
            stack.enter_context(torch.autocast(device.type, dtype=torch.bfloat16))
        yield


def full_precision(logits: Tensor) -> Tensor:
    """bfloat16 / float16 logits as float32; float32 and float64 ones as they are."""
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()


@dataclass
class Rollout:
    """One batch of sampled responses. B = P * G rows, contiguous groups."""
    prompts: Tensor        # [B, Lp] prompt tokens
    responses: Tensor      # [B, T] sampled tokens, PAD after EOS
    mask: Tensor           # [B, T] bool, True up to and including the first EOS
    rollout_logp: Tensor   # [B, T] log-prob of each sampled token under the *sampler* (0 on padding)
    steps: int             # decoding steps run (T)


def response_logits(model: "Policy", prompts: Tensor, responses: Tensor) -> Tensor:
    """The learner's forward: logits [B, T, V] that predicted each response token (the last prompt
    position predicts the first; response position t predicts t + 1). Each distinct prompt runs once
    (``TinyGPT.prefill``), then the responses continue their prompt's cache in one chunk. ``model``:
    a policy or a module wrapping one (DDP)."""
    return full_precision(model(prompts, continuation=responses[:, :-1]))   # [B, T, V]


def token_logp(logits: Tensor, responses: Tensor, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """Log-prob of each response token and the full log-distribution, both at ``temperature``.

    logits [B, T, V] -> (logp [B, T], logp_all [B, T, V]). PAD ids are valid indices, so the
    gather is safe; callers mask padding afterwards.
    """
    logp_all = torch.log_softmax(logits / temperature, dim=-1)   # [B, T, V]
    return logp_all.gather(2, responses[..., None])[..., 0], logp_all
