"""``RunConfig``: one frozen config for an RL run of the trainer, on the toy or the real model; every course
knob is a field.

Most fields apply to every run. A few belong to one plug-in: the toy policy's size and warm start, each task's
held-out size. A policy or a task names the fields it reads (``config_fields``); a run stores only the fields
that apply to it (``RunConfig.stored_fields``), and setting another plug-in's field is an error.

Derive a variant with ``dataclasses.replace(cfg, eps_high=0.28)`` so the difference between two
runs is one visible line. Loss knobs left at None take the loss function's own default
(``losses.ppo_loss`` eps 0.2, ``dapo_loss`` eps_high 0.28, ``gspo_loss`` 3e-4 / 4e-4, ...).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable

import torch

from .registry import make_task, policy_class

# estimators whose statistics span the whole batch (REINFORCE++'s whitening, GPG's alpha): a rank of a
# data-parallel run computes them on every rank's rewards (data_parallel.whole_batch), as std_scope="batch"
BATCH_WIDE_ESTIMATORS = ("reinforce_pp", "reinforce_pp_baseline", "gpg")

CHOICES = {
    "adv_estimator": ("grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "remax", "opo", "passk", "gpg"),
    "kl_estimator": ("k1", "k2", "k3"),
    "mismatch": ("none", "noise", "bf16", "stale"),
    "old_logp_source": ("learner", "sampler"),
    "correction": ("none", "tis", "mis"),
    "correction_level": ("token", "sequence"),
    "lr_schedule": ("constant", "cosine"),
    "precision": ("fp32", "tf32", "bf16"),
    "sampler_precision": (None, "fp32", "tf32", "bf16"),
    "old_logp_forward": ("auto", "separate"),
    "std_scope": ("group", "batch"),
}


def _plugin(default):
    """A field that only some policies or tasks read (those whose ``config_fields`` name it)."""
    return field(default=default, metadata={"plugin": True})


@dataclass(frozen=True)
class RunConfig:
    # --- run ---------------------------------------------------------------------------------
    task: str = "addition"             # a name in registry.TASKS: "addition" ("ab+cd=" -> the sum),
                                       # "scratchpad" (three digits, worked out column by column:
                                       # toy.scratchpad), or one added with registry.register_task
    policy: str = "tiny_gpt"           # a name in registry.POLICIES: the toy's TinyGPT (sized by the fields below,
                                       # warm-started), "smollm2", the real chat model (task "chat_addition"), or
                                       # "smollm2_lora", the same with LoRA adapters (the lora_* fields)
    seed: int = 0                      # RL seed: prompt order, sampling, minibatch order
    steps: int = 300                   # RL steps (one rollout batch each)
    device: str = "auto"               # "auto": CUDA when available, else CPU; or "cpu" / "cuda"
    num_threads: int | None = None     # torch CPU threads (None: leave torch's setting)
    precision: str = "fp32"            # the forward passes' arithmetic (policy.compute_precision):
                                       # "fp32", "tf32" (CUDA only) or "bf16" autocast; weights,
                                       # optimiser state and log-prob arithmetic stay float32
    sampler_precision: str | None = None   # the sampler's, when it differs from the learner's (a real
                                       # train/inference mismatch: chapter 06); None: the learner's
    eval_every: int = 25               # greedy held-out accuracy every this many steps
    max_new_tokens: int = 6            # generation budget; a correct toy answer needs at most 4
    # --- the held-out split, in the task's unit (never trained on) ----------------------------
    heldout_questions: int = _plugin(500)   # the toy's tasks ("addition", "scratchpad"): held-out prompts
    heldout_pairs: int = _plugin(10)   # "chat_addition": held-out pairs {a, b}, both orders, every wording
    # --- the smollm2_lora policy (lm.lora): LoRA adapters on the real model (peft) ------------
    lora_rank: int = _plugin(1)        # r of every adapter, 1 .. the smallest targeted layer's min(in, out)
    lora_alpha: float = _plugin(32.0)  # the adapters' scale is lora_alpha / lora_rank (peft's default scaling)
    lora_targets: tuple = _plugin(("all-linear",))   # peft's target_modules: "all-linear" (every linear layer
                                       # but the head), or module names ("q_proj", "v_proj", ...)
    # --- the tiny_gpt policy (toy.policy.TinyGPT): its size ... --------------------------------
    n_layer: int = _plugin(2)
    d_model: int = _plugin(64)
    n_head: int = _plugin(4)
    # ... and its warm start (supervised, on deliberately imperfect answers) --------------------
    warm_steps: int = _plugin(800)     # at most this many supervised steps; 0: RL from a random policy
    warm_target: float | None = _plugin(0.3)   # stop once greedy accuracy on 512 training prompts reaches it
    warm_batch: int = _plugin(256)
    warm_lr: float = _plugin(5e-3)
    warm_noise: float = _plugin(0.2)   # share of warm-start answers that are wrong
    warm_seed: int = _plugin(0)        # fixed across RL seeds: every seed starts from one policy
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
    micro_batches: int = 1             # gradient accumulation: each optimiser step's rows in this many
                                       # pieces, each backward on its own, scaled by split.piece_scale
    world_size: int = 1                # data-parallel ranks (train_distributed: gloo processes, DDP);
                                       # each samples prompts_per_step / world_size groups
    epochs: int = 1                    # passes over the rollout batch
    # --- loss --------------------------------------------------------------------------------
    loss: str | Callable = "grpo"      # a name in losses.LOSSES or a callable with the loss signature
    agg: str | None = None             # aggregation mode; None: the loss's default
    eps_low: float | None = None       # None: the loss's default (CISPO: no lower bound)
    eps_high: float | None = None
    dual_clip: float | None = None
    tau_pos: float | None = None       # SAPO temperatures
    tau_neg: float | None = None
    entropy_coef: float = 0.0          # entropy bonus: the loss subtracts entropy_coef * aggregate(entropy)
                                       # (verl actor.entropy_coeff), the same aggregation as the policy term
    # --- advantage ---------------------------------------------------------------------------
    adv_estimator: str = "grpo"        # "grpo" (group mean, optional std), "rloo", "reinforce_pp",
                                       # "reinforce_pp_baseline", "remax", "opo", "passk" or "gpg"
    std_scaling: bool | None = None    # divide by the group std; None: False for dr_grpo, else True
    std_scope: str = "group"           # with std_scaling and the grpo estimator, whose std divides:
                                       # the group's, or the whole batch's rewards ("batch": TRL's
                                       # scale_rewards="batch", ScaleRL's batch-level normalisation)
    # --- KL to the reference (the warm-start policy) ------------------------------------------
    kl_coef: float = 0.0               # beta; the loss adds beta * aggregate(kl_estimate(...))
    kl_estimator: str = "k3"
    # --- DAPO's data-side changes ------------------------------------------------------------
    dynamic_sampling: bool = False     # keep only groups with signal, sample more to refill P
    max_sampling_rounds: int = 4       # rollout batches drawn at most per step when filtering
    overlong_penalty: bool = False     # add rewards.overlong_penalty(len, max_new_tokens, overlong_cache)
    overlong_cache: int = 2
    mask_truncated: bool = False       # drop responses that hit the budget without an EOS from the loss
                                       # (DAPO's overlong filtering; TRL mask_truncated_completions); they
                                       # still count in their group's advantage
    # --- reward misconfigurations (chapter 08 shows what they do to a run) ---------------------
    verifier: str = "exact"            # a name in the task's verifiers; the addition task's "contains"
                                       # is a lenient check (the sum anywhere in the answer)
    length_bonus: float = 0.0          # reward per response token: a length-dependent reward
    format_weight: float = 0.0         # a second reward term: + format_weight * the task's "format"
                                       # verifier (the scratchpad task's well-formed trace), 0/1
    # --- sampler / learner mismatch and its correction -----------------------------------------
    mismatch: str = "none"             # "noise": N(0, s^2) on sampler logits; "bf16": bfloat16
                                       # sampler; "stale": sampler weights stale_steps optimiser steps old
    logits_noise: float = 0.5          # s for mismatch="noise"
    stale_steps: int = 1
    old_logp_source: str = "learner"   # pi_old from the learner's recompute, or (naive) the sampler's
    correction: str = "none"           # "tis" / "mis": corrections.correction_weights as is_weight
    correction_level: str = "token"
    correction_cap: float = 2.0
    # --- work the trainer may skip --------------------------------------------------------------
    monitor_kl_ref: bool = False       # the reference forward every step, for the kl/ref monitor; else
                                       # only when a KL term is on and on evaluation steps
    old_logp_forward: str = "auto"     # "auto": with one optimiser step per batch and pi_old from the
                                       # learner, pi_old is the loss forward's own log-probs, detached
                                       # (equal by definition); "separate": a no-grad forward first
    # --- changes during the run (chapter 08: failures that begin mid-run) ---------------------
    changes: tuple = ()                # {step: {knob: value}}: from RL step `step` on, the knobs take
                                       # these values (a schedule step, a verifier swap, a sampler that
                                       # falls behind); stored as ((step, ((knob, value), ...)), ...)

    def __post_init__(self):
        object.__setattr__(self, "changes", _normalise_changes(self.changes, self.steps))
        if self.changes:
            for step, _ in self.changes:       # every phase must be a valid config on its own
                try:
                    phase = self.at(step)
                except ValueError as e:
                    raise ValueError(f"changes at step {step}: {e}") from None
                if phase.max_new_tokens > self.max_new_tokens:
                    raise ValueError(f"changes at step {step}: max_new_tokens may only shrink "
                                     f"(the policy's context is sized for {self.max_new_tokens}), got "
                                     f"{phase.max_new_tokens}")
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        policy = policy_class(self.policy)                     # ValueError for an unknown policy, naming the known
        task = make_task(self)                                 # ValueError for an unknown task
        verifiers = task.verifiers
        if task.policy != (policy.token_ids or self.policy):
            raise ValueError(f"the {self.task!r} task's token ids are the {task.policy!r} "
                             f"policy's, got policy={self.policy!r}")
        self._check_plugin_fields(policy.config_fields, task.config_fields)
        if self.verifier not in verifiers:
            raise ValueError(f"verifier must be one of the {self.task!r} task's verifiers {tuple(verifiers)}, "
                             f"got {self.verifier!r}")
        for name in ("steps", "prompts_per_step", "minibatches", "epochs", "max_new_tokens",
                     "eval_every", "max_sampling_rounds", "stale_steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if not isinstance(self.group_size, int) or self.group_size < 2:
            raise ValueError(f"group_size must be an int >= 2, got {self.group_size!r}")
        for name in ("micro_batches", "world_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if self.prompts_per_step % (self.minibatches * self.world_size):
            raise ValueError(f"minibatches x world_size ({self.minibatches} x {self.world_size}) must divide "
                             f"prompts_per_step ({self.prompts_per_step}): minibatches are whole groups, and so "
                             f"is each rank's share")
        rows = self.prompts_per_step // (self.minibatches * self.world_size) * self.group_size
        if self.micro_batches > rows:
            raise ValueError(f"micro_batches ({self.micro_batches}) must be at most the rows of one rank's "
                             f"minibatch ({rows})")
        if self.world_size > 1 or self.micro_batches > 1:
            from .split import BATCH_STATISTIC_LOSSES
            if self.loss in BATCH_STATISTIC_LOSSES:
                raise ValueError(f"loss {self.loss!r} centres on statistics of the whole batch: it does not split "
                                 f"into micro-batches or ranks (micro_batches and world_size must be 1)")
        if self.world_size > 1 and self.dynamic_sampling:       # the batch-wide estimators: whole_batch
            raise ValueError(f"dynamic_sampling=True needs statistics of the whole batch (which groups to keep "
                             f"and refill, counted over every rank: the toy does not share them): world_size "
                             f"must be 1")
        for name in ("length_bonus", "entropy_coef", "format_weight"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")
        if self.format_weight and "format" not in verifiers:
            raise ValueError(f"format_weight needs a task with a 'format' verifier; the {self.task!r} task "
                             f"has {tuple(verifiers)}")
        if self.std_scope == "batch" and self.adv_estimator != "grpo":
            raise ValueError(f"std_scope='batch' applies to adv_estimator='grpo' only, got "
                             f"{self.adv_estimator!r}")
        if self.overlong_penalty and not 0 <= self.overlong_cache <= self.max_new_tokens:
            raise ValueError(f"overlong_cache must be in 0..max_new_tokens ({self.max_new_tokens}), "
                             f"got {self.overlong_cache!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        if self.device not in ("auto", "cpu", "cuda") and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:n]', got {self.device!r}")

    def _check_plugin_fields(self, policy_reads: tuple, task_reads: tuple) -> None:
        """Each field a plug-in reads is one of the config's; a plug-in field neither reads is at its default."""
        names = {f.name for f in fields(self)}
        for who, reads in ((f"policy {self.policy!r}", policy_reads), (f"task {self.task!r}", task_reads)):
            if set(reads) - names:
                raise ValueError(f"the {who} reads config fields {sorted(set(reads) - names)}, which RunConfig lacks")
        for f in fields(self):
            if (f.metadata.get("plugin") and f.name not in policy_reads + task_reads
                    and getattr(self, f.name) != f.default):
                raise ValueError(f"{f.name}={getattr(self, f.name)!r} is read by neither the policy "
                                 f"{self.policy!r} (it reads {list(policy_reads)}) nor the task {self.task!r} "
                                 f"(it reads {list(task_reads)})")

    def stored_fields(self) -> list[str]:
        """The fields this run's record keeps: every field that applies to any run, and the plug-in fields its
        policy and task read (a real-model run keeps none of the toy's)."""
        reads = policy_class(self.policy).config_fields + make_task(self).config_fields
        return [f.name for f in fields(self) if not f.metadata.get("plugin") or f.name in reads]

    def at(self, step: int) -> "RunConfig":
        """The config in force at RL step ``step`` (1-based): every change with onset <= step applied in
        order, without the schedule itself. A run without changes returns itself."""
        if not self.changes or step < self.changes[0][0]:
            return self
        return replace(self, changes=(), **self.knobs_changed_by(step))

    def knobs_changed_by(self, step: int) -> dict:
        """{knob: value} of every change with onset <= step, later changes overriding earlier ones."""
        return {k: v for onset, items in self.changes if onset <= step for k, v in items}

    def phases(self) -> list["RunConfig"]:
        """Every config the run uses: the base and the one in force from each change on."""
        return [self] + [self.at(step) for step, _ in self.changes]

    @property
    def onset(self) -> int | None:
        """The first RL step at which a change takes effect, or None."""
        return self.changes[0][0] if self.changes else None

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

    def diff(self, other: "RunConfig") -> dict:
        """Fields whose values differ: {name: (self's, other's)}."""
        return {f.name: (getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
                if getattr(self, f.name) != getattr(other, f.name)}


# knobs a run may change mid-run; the others fix the model, the batch layout or the schedule's length
CHANGEABLE = ("temperature", "lr", "lr_min", "grad_clip", "loss", "agg", "eps_low", "eps_high", "dual_clip",
              "tau_pos", "tau_neg", "entropy_coef", "std_scaling", "std_scope", "kl_coef", "kl_estimator",
              "dynamic_sampling", "overlong_penalty", "overlong_cache", "mask_truncated", "verifier",
              "length_bonus", "format_weight", "mismatch", "logits_noise", "stale_steps", "old_logp_source",
              "correction", "correction_level", "correction_cap", "max_new_tokens", "sampler_precision")


def _normalise_changes(changes, steps: int) -> tuple:
    """{step: {knob: value}} or pairs -> ((step, ((knob, value), ...)), ...) sorted by step, checked."""
    items = changes.items() if isinstance(changes, dict) else changes
    out = []
    for entry in items:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            raise ValueError(f"changes must map steps to {{knob: value}} dicts, got entry {entry!r}")
        step, knobs = entry
        knobs = dict(knobs)
        if not isinstance(step, int) or isinstance(step, bool) or not 1 <= step <= steps:
            raise ValueError(f"changes: a step must be an int in 1..steps ({steps}), got {step!r}")
        bad = sorted(set(knobs) - set(CHANGEABLE))
        if bad or not knobs:
            raise ValueError(f"changes at step {step}: {bad or 'no knob'} cannot change mid-run; "
                             f"changeable: {', '.join(CHANGEABLE)}")
        out.append((step, tuple(sorted(knobs.items()))))
    out.sort(key=lambda e: e[0])
    if len({s for s, _ in out}) != len(out):
        raise ValueError(f"changes: each step at most once, got steps {[s for s, _ in out]}")
    return tuple(out)


# Sizes the notebook's SIZE switch and the benchmark select. "smoke" is what CI executes.
SIZES: dict[str, dict] = {
    "smoke": dict(steps=300, prompts_per_step=64, group_size=8, eval_every=25),
    # width 128: a 64-wide policy stalls near 0.88 in one seed in three, missing every sum whose
    # units digits add up to 10 (benchmarks/toy_benchmark.md); this one passes 0.95 in about 2 min
    "cpu": dict(steps=1000, prompts_per_step=64, group_size=8, d_model=128, lr_schedule="cosine",
                lr=1e-3, lr_min=1e-4, eval_every=50),
    # not yet run on a GPU (none was available): sized by estimate to keep one busy. Width 512, 6 layers
    # (19 M parameters, about 113 MFLOP per learner token), 1024 prompts x G = 16 per step in 4
    # minibatches, bf16 autocast; benchmarks/toy_training.py prints its FLOPs per token and per step
    "gpu": dict(steps=500, prompts_per_step=1024, group_size=16, n_layer=6, d_model=512, n_head=8,
                minibatches=4, precision="bf16", lr=3e-4, lr_schedule="cosine", lr_min=3e-5, warmup_steps=20,
                warm_steps=2000, warm_batch=1024, warm_lr=1e-3, eval_every=50),
    # the long-answer task (toy.scratchpad): three-digit sums worked out column by column in up to 48
    # tokens; the smoke policy, 32 prompts x 8 per step (about 0.4 s a step on one CPU thread)
    "long": dict(task="scratchpad", max_new_tokens=48, steps=200, prompts_per_step=32, group_size=8,
                 eval_every=20, warm_steps=1500, warm_target=0.3),
    # the long-answer task for a GPU, not yet run on one: a 64-token budget, the gpu size's policy (width
    # 512, 6 layers), 512 prompts x 16 per step in 4 minibatches, bf16 autocast
    "long_gpu": dict(task="scratchpad", max_new_tokens=64, steps=400, prompts_per_step=512, group_size=16,
                     n_layer=6, d_model=512, n_head=8, minibatches=4, precision="bf16", lr=3e-4,
                     warmup_steps=20, eval_every=20, warm_steps=3000, warm_batch=1024, warm_lr=1e-3,
                     warm_target=0.3),
    # the real chat model (SmolLM2-135M-Instruct, lm.policy) on single-digit addition in chat form: 8 prompts
    # x 4 replies of at most 48 tokens per step, the learner's forward in 8 micro-batches of one group (peak
    # memory under 4 GB on a CPU); reward = the exact verdict + 0.5 x the format verdict ("Answer: <n>")
    "real": dict(policy="smollm2", task="chat_addition", heldout_pairs=10, max_new_tokens=48, prompts_per_step=8,
                 group_size=4, micro_batches=8, lr=2e-5, warmup_steps=3, steps=30, eval_every=10,
                 format_weight=0.5),
    # the real model for a GPU, not yet run on one: bf16 autocast, 64 prompts x 8 replies of up to 128
    # tokens in 2 minibatches of 4 micro-batches
    "real_gpu": dict(policy="smollm2", task="chat_addition", heldout_pairs=10, max_new_tokens=128,
                     prompts_per_step=64, group_size=8, minibatches=2, micro_batches=4, precision="bf16",
                     lr=1e-5, warmup_steps=5, steps=200, eval_every=20, format_weight=0.5),
}


def make_config(size: str = "smoke", **overrides) -> RunConfig:
    """The config of a named size, with any field overridden."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    return replace(RunConfig(), **{**SIZES[size], **overrides})
