"""The RL trainer: GRPO-family training of any policy on any task (chapters 07-11 on the toy, 13 on the real model).

- ``config``         ``RunConfig`` (one frozen dataclass, every knob a field; ``policy`` and ``task`` pick the
                     plug-ins by name) and the named sizes, toy and real
- ``trainer``        ``train(config) -> History``: the loop and the steps that call the others; it calls
                     course_lib's losses, advantages, aggregation, kl, corrections and rewards and re-implements none
- ``policy``         the seam, policy side: ``Policy`` (what the trainer reads from a policy, each hook with
                     its default), ``Rollout``, the forward's precision, the learner's log-probs
- ``task``           the seam, task side: ``Task``
- ``registry``       the policies and tasks by name (``POLICIES``, ``TASKS``), imported on first use
- ``model``          the policy a config names, built for it, and the held-out accuracy
- ``progress``       the progress bar (one line updated in place in a notebook)
- ``rollout``        the sampled batch, shaped rewards, the group filter, sampling metrics
- ``loss_step``      the loss a config names, the batch's constants before it (targets), ``policy_loss``
- ``samplers``, ``schedule``, ``device``, ``history``   the mismatched sampler, the lr, device helpers, ``History``
- ``checkpoint``     a run's state in one file (``Checkpoint``), to go on from where an interrupted run stopped
- ``split``          every aggregation under micro-batches and data-parallel ranks (the exact per-piece normaliser)
- ``data_parallel``, ``distributed``   the trainer's ranks, and the split run on torch.distributed (chapter 10)

This package imports nothing from the plug-ins beside it, which import its seam: the policies
(``toy.policy.TinyGPT``, ``lm.policy.ChatPolicy``) subclass its ``Policy``, the tasks (``toy.task``,
``toy.scratchpad``, ``lm.task``) give what ``Task`` names, and ``registry`` finds both by name. The toy's studies
(``toy.experiments``, ``toy.curves``, ...) run this trainer.
"""
from .config import CHOICES, SIZES, RunConfig, make_config
from .device import read_back, stop_check_every
from .history import History, config_record, load_histories, save_histories
from .loss_step import (ADV_ESTIMATORS, BatchTargets, LossSetup, Targets, advantages_of, learner_logp, loss_knobs,
                        loss_mask, loss_setup, policy_loss, remax_baseline, reuses_loss_forward, targets)
from .model import build_model, heldout_accuracy
from .policy import Policy, Rollout, compute_precision, response_logits, token_logp
from .registry import make_task, policy_class, register_policy, register_task
from .rollout import Batch, Collected, sampling_metrics, select_groups, shaped_rewards
from .schedule import LrSchedule, lr_at
from .task import Task
from .trainer import collect, initial_policy, learn, train, train_distributed, update

__all__ = ["CHOICES", "SIZES", "RunConfig", "make_config", "read_back", "stop_check_every", "History", "config_record",
           "load_histories", "save_histories", "ADV_ESTIMATORS", "BatchTargets", "LossSetup", "Targets",
           "advantages_of", "learner_logp", "loss_knobs", "loss_mask", "loss_setup", "policy_loss", "remax_baseline",
           "reuses_loss_forward", "targets", "build_model", "heldout_accuracy", "Policy", "Rollout",
           "compute_precision", "response_logits", "token_logp", "make_task", "policy_class", "register_policy",
           "register_task", "Batch", "Collected", "sampling_metrics", "select_groups", "shaped_rewards", "LrSchedule",
           "lr_at", "Task", "collect", "initial_policy", "learn", "train", "train_distributed", "update"]
