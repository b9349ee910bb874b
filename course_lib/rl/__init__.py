"""The RL trainer: GRPO-family training of any policy on any task (chapters 07-11 on the toy, 13 on the real model).

- ``config``         ``ToyConfig`` (one frozen dataclass, every knob a field; ``policy`` and ``task`` pick the
                     plug-ins by name) and the named sizes, toy and real
- ``trainer``        ``train(config) -> History``: the loop and the steps that call the others; it calls
                     course_lib's losses, advantages, aggregation, kl, corrections and rewards and re-implements none
- ``policy``         the seam: ``Policy`` (what the trainer reads from a policy, each hook with its default),
                     ``Rollout``, the forward's precision, the learner's log-probs
- ``model``          the policy a config names (the toy's ``TinyGPT`` or the real model's ``lm.policy.ChatPolicy``)
                     and the held-out accuracy
- ``rollout``        the sampled batch, shaped rewards, the group filter, sampling metrics
- ``loss_step``      the loss a config names, the batch's constants before it (targets), ``policy_loss``
- ``samplers``, ``schedule``, ``device``, ``history``   the mismatched sampler, the lr, device helpers, ``History``
- ``checkpoint``     a run's state in one file (``Checkpoint``), to go on from where an interrupted run stopped
- ``split``          every aggregation under micro-batches and data-parallel ranks (the exact per-piece normaliser)
- ``data_parallel``, ``distributed``   the trainer's ranks, and the split run on torch.distributed (chapter 10)

The plug-ins sit beside this package and import nothing from it but the seam, ``rl.policy``: policies
(``toy.policy.TinyGPT``, ``lm.policy.ChatPolicy``) subclass its ``Policy``; tasks (``toy.task``,
``toy.scratchpad``, ``lm.task``). The toy's studies (``toy.experiments``, ``toy.curves``, ...) run this trainer.
"""
import importlib

# what ``from course_lib.rl import X`` gives, and the module each comes from: loaded on first use, so that a
# plug-in can import the seam (``rl.policy``) while the trainer, which imports the plug-ins, is not yet loaded
EXPORTS = {"SIZES": "config", "ToyConfig": "config", "make_config": "config", "History": "history",
           "load_histories": "history", "save_histories": "history", "Policy": "policy", "Rollout": "policy",
           "train": "trainer"}
__all__ = list(EXPORTS)


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
