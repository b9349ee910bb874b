"""Slider panels that work in JupyterLab and headless, one module per topic (the topics of
``course_lib.sim`` and ``course_lib.plots``). ``core`` holds the machinery every panel is built with
(``Slider``, ``Toggle``, ``Choice``, ``Panel``, ``panel``, ``to_html``; its docstring says how a panel works);
each topic module holds its chapter's panels, which call ``course_lib.plots`` for every figure.

    ppo          chapter 01: PPO's clip cases, GAE
    advantages   chapter 02: a group's rewards -> its advantages
    aggregation  chapter 03: rewards and lengths -> the four modes' weights
    kl           chapter 04: the drift experiment, the adaptive controller
    ratios       chapter 05: c(r, A) of every loss, SAPO's gate
    mismatch     chapter 06: the cap C and the batch size
    diagnosis    chapter 08: any monitor of any failure against the healthy run
    frameworks   chapter 09: each framework's normaliser
    split        chapter 10: micro-batches, ranks and the spread of lengths
    real_model   chapter 12: a real model's reply coloured token by token

Every name is importable from ``course_lib.widgets`` itself (``widgets.clip_panel()``).
"""
from .core import (  # noqa: F401
    ActiveWhen,
    Slider,
    Toggle,
    Choice,
    Control,
    Panel,
    _png_size,
    to_html,
    panel,
)
from .ppo import (  # noqa: F401
    clip_panel,
    gae_panel,
)
from .advantages import (  # noqa: F401
    group_advantage_panel,
)
from .aggregation import (  # noqa: F401
    AGG_PANEL_MAX_LEN,
    aggregation_panel,
)
from .kl import (  # noqa: F401
    kl_drift_panel,
    adaptive_kl_panel,
)
from .ratios import (  # noqa: F401
    grad_coefficient_panel,
    sapo_gate_panel,
)
from .mismatch import (  # noqa: F401
    cap_panel,
)
from .diagnosis import (  # noqa: F401
    gallery_panel,
)
from .frameworks import (  # noqa: F401
    normaliser_panel,
)
from .split import split_panel  # noqa: F401,E402
from .real_model import token_panel  # noqa: F401,E402
