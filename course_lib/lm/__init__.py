"""The real model, SmolLM2-135M-Instruct (offline), and what the course builds on it:

- ``model``   the model: the built folder, load, chat prompts, seeded sampling, scoring (re-exported here)
- ``task``    its RL task: single-digit addition in chat form, the verifiers, ``ChatTask`` for the trainer
- ``policy``  ``ChatPolicy``: the model as the trainer's policy
- ``tokens``  chapter 12's measurements on its replies
- ``runs``    chapter 13's reading of the stored GRPO runs

``python -m course_lib.lm build`` builds the model's folder (``make model`` runs it).
"""
from .model import (BUILD_COMMAND, CACHE_VARIABLE, GGUF_NAME, MANIFEST, MODEL, PADDINGS, PROMPT_PAD, ChatLM,
                    ModelNotBuilt, Replies, cache_dir, chat_ids, gguf_file, is_built, load, load_tokenizer,
                    pad_batch, prompt_rows, prompt_tensor, token_logp_entropy, top_p_filter)

__all__ = ["BUILD_COMMAND", "CACHE_VARIABLE", "GGUF_NAME", "MANIFEST", "MODEL", "PADDINGS", "PROMPT_PAD", "ChatLM",
           "ModelNotBuilt", "Replies", "cache_dir", "chat_ids", "gguf_file", "is_built", "load", "load_tokenizer",
           "pad_batch", "prompt_rows", "prompt_tensor", "token_logp_entropy", "top_p_filter"]
