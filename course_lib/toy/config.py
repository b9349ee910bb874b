"""One frozen config for the toy trainer; every course knob is a field.

Derive a variant with ``dataclasses.replace(cfg, eps_high=0.28)`` so the difference between two
runs is one visible line. Loss knobs left at None take the loss function's own default
(``losses.ppo_loss`` eps 0.2, ``dapo_loss`` eps_high 0.28, ``gspo_loss`` 3e-4 / 4e-4, ...).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Callable

import torch

CHOICES = {
    "adv_estimator": ("grpo", "rloo"),
    "kl_estimator": ("k1", "k2", "k3"),
    "mismatch": ("none", "noise", "bf16", "stale"),
    "old_logp_source": ("learner", "sampler"),
    "correction": ("none", "tis", "mis"),
    "correction_level": ("token", "sequence"),
    "lr_schedule": ("constant", "cosine"),
    "verifier": ("exact", "contains"),
}


@dataclass(frozen=True)
class ToyConfig:
    # --- run ---------------------------------------------------------------------------------
    seed: int = 0                      # RL seed: prompt order, sampling, minibatch order
    steps: int = 300                   # RL steps (one rollout batch each)
    device: str = "auto"               # "auto": CUDA when available, else CPU; or "cpu" / "cuda"
    num_threads: int | None = None     # torch CPU threads (None: leave torch's setting)
    eval_every: int = 25               # greedy held-out accuracy every this many steps
    n_heldout: int = 500               # held-out prompts (never trained on)
    # --- policy ------------------------------------------------------------------------------
    n_layer: int = 2
    d_model: int = 64
    n_head: int = 4
    max_new_tokens: int = 6            # generation budget; a correct answer needs at most 4
    # --- warm start (supervised, on deliberately imperfect answers) ---------------------------
    warm_steps: int = 800              # at most this many supervised steps; 0: RL from a random policy
    warm_target: float | None = 0.3    # stop once greedy accuracy on 512 training prompts reaches it
    warm_batch: int = 256
    warm_lr: float = 5e-3
    warm_noise: float = 0.2            # share of warm-start answers that are wrong
    warm_seed: int = 0                 # fixed across RL seeds: every seed starts from one policy
    # --- sampling ----------------------------------------------------------------------------
    prompts_per_step: int = 64         # P
    group_size: int = 8                # G; B = P * G responses per step
    temperature: float = 1.0           # sampler and learner both use logits / temperature
    # --- optimiser ---------------------------------------------------------------------------
    lr: float = 1e-3
    lr_schedule: str = "constant"      # "cosine" decays from lr to lr_min over the run
    lr_min: float = 1e-4
    warmup_steps: int = 10             # linear lr warm-up (optimiser steps): avoids a big first Adam step
    grad_clip: float = 1.0
    minibatches: int = 1               # optimiser steps per rollout batch (split by groups)
    epochs: int = 1                    # passes over the rollout batch
    # --- loss --------------------------------------------------------------------------------
    loss: str | Callable = "grpo"      # a name in losses.LOSSES or a callable with the loss signature
    agg: str | None = None             # aggregation mode; None: the loss's default
    eps_low: float | None = None       # None: the loss's default (CISPO: no lower bound)
    eps_high: float | None = None
    dual_clip: float | None = None
    tau_pos: float | None = None       # SAPO temperatures
    tau_neg: float | None = None
    # --- advantage ---------------------------------------------------------------------------
    adv_estimator: str = "grpo"        # "grpo" (group mean, optional std) or "rloo"
    std_scaling: bool | None = None    # divide by the group std; None: False for dr_grpo, else True
    # --- KL to the reference (the warm-start policy) ------------------------------------------
    kl_coef: float = 0.0               # beta; the loss adds beta * aggregate(kl_estimate(...))
    kl_estimator: str = "k3"
    # --- DAPO's data-side changes ------------------------------------------------------------
    dynamic_sampling: bool = False     # keep only groups with signal, sample more to refill P
    max_sampling_rounds: int = 4       # rollout batches drawn at most per step when filtering
    overlong_penalty: bool = False     # add rewards.overlong_penalty(len, max_new_tokens, overlong_cache)
    overlong_cache: int = 2
    # --- reward misconfigurations (chapter 08 shows what they do to a run) ---------------------
    verifier: str = "exact"            # "contains": a lenient check (the sum anywhere in the answer)
    length_bonus: float = 0.0          # reward per response token: a length-dependent reward
    # --- sampler / learner mismatch and its correction -----------------------------------------
    mismatch: str = "none"             # "noise": N(0, s^2) on sampler logits; "bf16": bfloat16
                                       # sampler; "stale": sampler weights stale_steps optimiser steps old
    logits_noise: float = 0.5          # s for mismatch="noise"
    stale_steps: int = 1
    old_logp_source: str = "learner"   # pi_old from the learner's recompute, or (naive) the sampler's
    correction: str = "none"           # "tis" / "mis": corrections.correction_weights as is_weight
    correction_level: str = "token"
    correction_cap: float = 2.0

    def __post_init__(self):
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("steps", "prompts_per_step", "minibatches", "epochs", "max_new_tokens",
                     "eval_every", "max_sampling_rounds", "stale_steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if not isinstance(self.group_size, int) or self.group_size < 2:
            raise ValueError(f"group_size must be an int >= 2, got {self.group_size!r}")
        if self.prompts_per_step % self.minibatches:
            raise ValueError(f"minibatches ({self.minibatches}) must divide prompts_per_step "
                             f"({self.prompts_per_step}): minibatches are whole groups")
        if not (isinstance(self.length_bonus, (int, float)) and not isinstance(self.length_bonus, bool)
                and self.length_bonus >= 0):
            raise ValueError(f"length_bonus must be a number >= 0, got {self.length_bonus!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        if self.device not in ("auto", "cpu", "cuda") and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:n]', got {self.device!r}")

    @property
    def batch_size(self) -> int:
        """B = P * G responses per rollout batch."""
        return self.prompts_per_step * self.group_size

    def resolved_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r}, but this PyTorch ({torch.__version__}) sees no CUDA "
                             f"GPU; use device='auto' (CUDA when present, else CPU) or 'cpu'")
        return torch.device(self.device)

    def diff(self, other: "ToyConfig") -> dict:
        """Fields whose values differ: {name: (self's, other's)}."""
        return {f.name: (getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
                if getattr(self, f.name) != getattr(other, f.name)}


# Sizes the notebook's SIZE switch and the benchmark select. "smoke" is what CI executes.
SIZES: dict[str, dict] = {
    "smoke": dict(steps=300, prompts_per_step=64, group_size=8, eval_every=25),
    # width 128: a 64-wide policy stalls near 0.88 in one seed in three, missing every sum whose
    # units digits add up to 10 (benchmarks/toy_benchmark.md); this one passes 0.95 in about 2 min
    "cpu": dict(steps=1000, prompts_per_step=64, group_size=8, d_model=128, lr_schedule="cosine",
                lr=1e-3, lr_min=1e-4, eval_every=50),
    # not yet measured on a GPU: a wider, deeper policy and 8x the batch
    "gpu": dict(steps=2000, prompts_per_step=512, group_size=8, n_layer=4, d_model=256, n_head=8,
                lr=5e-4, lr_schedule="cosine", lr_min=5e-5, warmup_steps=20, warm_steps=2000,
                warm_lr=1e-3, eval_every=100),
}


def make_config(size: str = "smoke", **overrides) -> ToyConfig:
    """The config of a named size, with any field overridden."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    return replace(ToyConfig(), **{**SIZES[size], **overrides})
