"""LoRA on the real model: ``LoraChatPolicy`` is SmolLM2-135M-Instruct with peft's LoRA adapters, as the trainer's
policy (``make_config("real", policy="smollm2_lora", lora_rank=1)``).

peft puts the adapters inside the model's own linear layers, so everything that runs the model (``ChatLM``'s
sampling and scoring, chapter 12's measurements, the learner's forward) runs the adapted model unchanged. What
changes for the trainer:

- the trainable parameters are the adapters' (peft freezes every base weight), so AdamW holds state for them
  alone and no base weight, the tied embedding included, gets a gradient;
- pi_ref is the same model with its adapters switched off (``AdaptersOff``): no second copy of the weights and
  nothing to reload from disk;
- a backward computes the gradient of the activations through every layer but of no base weight, about one
  forward's work instead of two (``flops_per_token``).

The adapters start at zero (peft's B = 0), so the policy starts as the pretrained model, to the last bit. A is
drawn at random; with ``seed`` (the trainer passes the run's) it is drawn from that seed alone, so a run repeats
in any process whatever the process drew before.
"""
from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from . import model as lm
from .policy import ChatPolicy, build_policy

ALL_LINEAR = "all-linear"


def peft_kwargs(rank: int, alpha: float, targets: tuple) -> dict:
    """peft's ``LoraConfig`` keywords for adapters of rank ``rank`` and scale ``alpha / rank`` on ``targets``, no
    dropout, no bias: what ``LoraChatPolicy`` builds and what TRL is handed (``frameworks.peft_lora_kwargs``)."""
    targets = tuple(targets)
    return {"r": rank, "lora_alpha": alpha, "target_modules": ALL_LINEAR if targets == (ALL_LINEAR,) else list(targets),
            "lora_dropout": 0.0, "bias": "none"}


def targeted_linears(model: nn.Module, targets: tuple) -> dict[str, nn.Linear]:
    """The linear layers an adapter goes on, by name: every one but the output head for ``("all-linear",)``
    (peft's reading of "all-linear"), else those whose name ends in one of ``targets``."""
    head = model.get_output_embeddings()
    linears = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear) and m is not head}
    if tuple(targets) == (ALL_LINEAR,):
        return linears
    return {n: m for n, m in linears.items() if n.rsplit(".", 1)[-1] in targets}


def rank_limit(model: nn.Module, targets: tuple) -> tuple[int, str]:
    """The largest LoRA rank every targeted layer can take, min(in, out) of the smallest, and that layer's name."""
    layers = targeted_linears(model, targets)
    if not layers:
        names = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise ValueError(f"lora_targets={targets!r} names no linear layer of the model; its layers: {names} "
                         f"(or {ALL_LINEAR!r})")
    name, layer = min(layers.items(), key=lambda kv: min(kv[1].in_features, kv[1].out_features))
    return min(layer.in_features, layer.out_features), name


class LoraChatPolicy(ChatPolicy):
    """A ``ChatLM`` whose linear layers carry LoRA adapters of rank ``rank`` and scale ``alpha / rank``."""
    config_fields = ("lora_rank", "lora_alpha", "lora_targets")
    token_ids = "smollm2"                       # the chat task's ids: the same tokenizer

    def __init__(self, chat: lm.ChatLM, rank: int = 1, alpha: float = 32.0, targets: tuple = (ALL_LINEAR,),
                 seed: int | None = None):
        from peft import LoraConfig, get_peft_model
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
            raise ValueError(f"lora_rank must be an int >= 1, got {rank!r}")
        if not (isinstance(alpha, (int, float)) and alpha > 0):
            raise ValueError(f"lora_alpha must be a number > 0, got {alpha!r}")
        limit, layer = rank_limit(chat.model, targets)
        if rank > limit:
            raise ValueError(f"lora_rank={rank} does not fit the model: {layer} maps {limit} features, so a rank "
                             f"above {limit} adds nothing a full update of it lacks; use 1 .. {limit}")
        cuda = [chat.device.index or 0] if chat.device.type == "cuda" else []
        with warnings.catch_warnings(), torch.random.fork_rng(devices=cuda):   # the caller's generator untouched
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            if seed is not None:
                torch.manual_seed(seed)         # A's draw: the seed's alone
            wrapped = get_peft_model(chat.model, LoraConfig(**peft_kwargs(rank, alpha, targets)))
        super().__init__(chat)                  # chat.model now holds the adapters: its parameters are registered
        self.__dict__["peft"] = wrapped         # the switch for the adapters; not a submodule (the same weights)

    @classmethod
    def for_config(cls, cfg, dtype: torch.dtype, device: torch.device) -> "LoraChatPolicy":
        """The pretrained model on ``device`` with fresh adapters (B = 0) of the config's rank, alpha and targets,
        A drawn from the run's seed."""
        return cls(build_policy(dtype, device).chat, cfg.lora_rank, cfg.lora_alpha, tuple(cfg.lora_targets),
                   seed=cfg.seed)

    def reference(self) -> "AdaptersOff":
        """pi_ref: this very model with its adapters switched off, the pretrained weights (the trainer's
        ``reference``)."""
        return AdaptersOff(self)

    def flops_per_token(self, context: float, backward: bool = True) -> float:
        """A forward's FLOPs (``ChatPolicy``'s count), and with the backward one more: the activations' gradient
        through every layer; the adapters' own weight gradients are negligible (rank x (in + out) per layer)."""
        fwd = super().flops_per_token(context, backward=False)
        return 2 * fwd if backward else fwd


class AdaptersOff(nn.Module):
    """pi_ref for a LoRA policy: the policy's forward run with its adapters disabled, without
    gradient. It holds no weights of its own, so a checkpoint keeps nothing for it."""

    def __init__(self, policy: LoraChatPolicy):
        super().__init__()
        self.__dict__["policy"] = policy    # not a submodule: the policy's parameters, not pi_ref's

    @torch.no_grad()
    def forward(self, prompts: Tensor, cache=None, *, continuation: Tensor | None = None) -> Tensor:
        with self.policy.peft.disable_adapter():
            return self.policy(prompts, cache, continuation=continuation)

    def release(self) -> None:
        """Nothing to drop: the weights are the policy's."""
