"""The trainer's seam on the task side: what ``train`` reads from a task."""
from __future__ import annotations

from typing import Callable, Protocol

from torch import Tensor


class Task(Protocol):
    """What the trainer needs from a task (the toy's ``toy.task.AdditionTask`` and ``toy.scratchpad.ScratchpadTask``,
    the real model's ``lm.task.ChatTask``); ``registry.TASKS`` names them.

    - ``prompts(split)``: prompt tokens [N, prompt_len] of "train" or "heldout", in a fixed order;
    - ``verifiers``: name -> (prompts [B, prompt_len], responses [B, T], the pad id after EOS) -> 0/1 [B];
      "exact" is the reward and the accuracy the trainer reports, ``RunConfig.verifier`` picks the
      one that pays the reward;
    - ``to_text(tokens)``: a readable string;
    - ``policy``: the name of the policy whose token ids its prompts and verifiers use (``registry.POLICIES``);
    - ``config_fields``: the run config's plug-in fields it reads (its held-out size), which a run stores;
    - optionally ``reply_categories(prompts, responses)``: name -> 0/1 [B], the categories of each reply
      (``lm.task.categories``); the trainer logs each one's share of a step's samples as ``replies/<name>``.
    ``registry.register_task`` makes one from a config: ``factory(cfg)``.
    """
    name: str
    policy: str
    config_fields: tuple[str, ...]
    prompt_len: int
    vocab_size: int
    verifiers: dict[str, Callable[[Tensor, Tensor], Tensor]]

    def prompts(self, split: str = "train") -> Tensor: ...

    def to_text(self, tokens) -> str: ...
