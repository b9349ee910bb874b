"""The plug-ins a config names, by name: ``POLICIES`` (``cfg.policy``) and ``TASKS`` (``cfg.task``).

An entry is the plug-in itself or its place as "module:name", imported on first use (as transformers' ``AutoModel``
mapping does), so the trainer never imports a plug-in by hand and a plug-in may import the trainer's seam.
A reader's own policy or task is one ``register_policy`` / ``register_task`` call away.
"""
from __future__ import annotations

import importlib
from typing import Callable

# name -> a ``rl.policy.Policy`` subclass (its ``for_config`` and ``initial`` build it for a config)
POLICIES: dict[str, type | str] = {"tiny_gpt": "course_lib.toy.policy:TinyGPT",
                                   "smollm2": "course_lib.lm.policy:ChatPolicy",
                                   "smollm2_lora": "course_lib.lm.lora:LoraChatPolicy"}
# name -> factory(cfg) -> a task (``rl.task.Task``) sized by the config. "chat_addition" is the real model's task
TASKS: dict[str, Callable | str] = {"addition": "course_lib.toy.task:addition_task",
                                    "scratchpad": "course_lib.toy.scratchpad:scratchpad_task",
                                    "chat_addition": "course_lib.lm.task:chat_task"}


def _entry(table: dict, kind: str, name: str):
    if name not in table:
        raise ValueError(f"{kind} must be one of {sorted(table)}, got {name!r}")
    entry = table[name]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = table[name] = getattr(importlib.import_module(module), attr)
    return entry


def _register(table: dict, name: str, entry) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    table[name] = entry


def policy_class(name: str) -> type:
    """The ``Policy`` subclass registered as ``name``; an unknown name lists the known ones."""
    return _entry(POLICIES, "policy", name)


def register_policy(name: str, cls: type) -> None:
    """Make ``RunConfig(policy=name)`` train a ``cls`` (a ``rl.policy.Policy`` subclass)."""
    _register(POLICIES, name, cls)


def make_task(cfg):
    """The task a config names (``cfg.task``), built by its factory from the config (its held-out size)."""
    return _entry(TASKS, "task", cfg.task)(cfg)


def register_task(name: str, factory: Callable) -> None:
    """Make ``RunConfig(task=name)`` build its task with ``factory(cfg)``."""
    _register(TASKS, name, factory)
