"""Chapter 07's toy: a tiny policy learns two-digit addition by GRPO-family RL.

- ``task``     the prompts, the verifiable 0/1 reward, the imperfect warm-start data
- ``policy``   a tiny decoder-only transformer, KV-cache sampling, the learner's log-probs
- ``config``   ``ToyConfig`` (one frozen dataclass, every knob a field) and the named sizes
- ``trainer``  ``train(config) -> History``; it calls course_lib's losses, advantages,
               aggregation, kl, corrections and rewards and re-implements none of them
- ``history``  ``History`` and its two file formats (rows JSON, the result files' columns JSON)
- ``curves``   presentation: plots of Histories and result files (nothing imports it)
"""
from .config import SIZES, ToyConfig, make_config
from .history import History, load_histories, save_histories
from .trainer import train

__all__ = ["SIZES", "ToyConfig", "make_config", "History", "train", "save_histories", "load_histories"]
