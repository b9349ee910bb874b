"""Chapter 07's toy: a tiny policy learns two-digit addition by GRPO-family RL.

- ``task``     the prompts, the verifiable 0/1 reward, the imperfect warm-start data
- ``policy``   a tiny decoder-only transformer, KV-cache sampling, the learner's log-probs
- ``config``   ``ToyConfig`` (one frozen dataclass, every knob a field) and the named sizes
- ``trainer``  ``train(config) -> History``; it calls course_lib's losses, advantages,
               aggregation, kl, corrections and rewards and re-implements none of them
- ``curves``   presentation: plots of Histories and result files (nothing imports it)
"""
from .config import SIZES, ToyConfig, make_config
from .trainer import History, load_histories, save_histories, train

__all__ = ["SIZES", "ToyConfig", "make_config", "History", "train", "save_histories", "load_histories"]
