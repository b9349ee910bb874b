"""Chapter 13's run as a TRL user writes it: the task's questions as a dataset of chat prompts, and its two
verdicts as TRL reward functions. With ``GRPOConfig(**frameworks.to_trl(cfg))`` (which sets ``reward_weights``
to [1, ``format_weight``]) these are everything ``trl.GRPOTrainer`` needs besides the model and its tokenizer;
``benchmarks/trl_real.py`` trains with them. Nothing here imports TRL; ``dataset`` needs the ``datasets``
package, which TRL installs."""
from __future__ import annotations

from . import task


def chat_prompt(question: str) -> list[dict]:
    """One question as the conversation TRL renders with the model's chat template
    (``lm.chat_ids``'s turns)."""
    return [{"role": "system", "content": task.SYSTEM}, {"role": "user", "content": question}]


def dataset(questions: task.Questions):
    """The questions as a ``datasets.Dataset``: a conversational "prompt" and the "answer" the
    rewards read (TRL hands every dataset column to each reward function as a keyword)."""
    from datasets import Dataset
    return Dataset.from_dict({"prompt": [chat_prompt(t) for t in questions.texts],
                              "answer": questions.answers})


def exact_reward(completions, answer, **_) -> list[float]:
    """``task.exact`` on each completion's text: the last integer it states is the sum."""
    return [task.exact(c[0]["content"], a) for c, a in zip(completions, answer)]


def format_reward(completions, **_) -> list[float]:
    """``task.formatted`` on each completion's text: it states "Answer: <integer>"."""
    return [task.formatted(c[0]["content"]) for c in completions]


def reward_funcs(cfg) -> list:
    """The reward functions in the order of ``to_trl``'s ``reward_weights``: [exact, format]
    (format only when the config weighs it)."""
    return [exact_reward, format_reward] if cfg.format_weight else [exact_reward]
