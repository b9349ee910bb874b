"""Figures for the chapters, one module per topic (the topics of ``course_lib.sim``): each function takes
data (or a small spec), calls the library for every number, and returns a matplotlib Figure, or a text
and a Figure for a slider panel. Presentation only.

    course       chapter 00: the course map and each chapter's exercises
    ppo          chapter 01: PPO's clip cases, GAE, one and several updates per batch
    advantages   chapter 02: group advantages, the difficulty profile, the signal of a group
    aggregation  chapter 03: the four aggregation modes, the length sweep, the overlong penalty
    kl           chapter 04: the estimators, the drift experiment, their gradients, the controller
    ratios       chapter 05: c(r, A) of every loss, GSPO's drop-out, SAPO's gate
    mismatch     chapter 06: TIS / MIS, the cap C, token vs sequence level, stale samplers
    frameworks   chapter 09: each framework's normaliser on one batch, the toy trained by TRL
    split        chapter 10: the gradient error of each naive split of the batch
    real_model   chapter 12: a real model's tokens coloured, ratio spreads, clipping by lr, entropy
    real_runs    chapter 13: the stored GRPO runs on the real model, what moves first, held-out before and after, pass@k
    lineage      chapter 14: GRPO and its descendants on the real model, seed bands, what each clip removes
    lora         the LoRA chapter: a learning-rate sweep per setting, with each one's good band
    common       what several of them draw with

Every name is importable from ``course_lib.plots`` itself (``plots.course_map()``).
"""
from .course import (  # noqa: F401
    COURSE_PARTS,
    exercises_by_chapter,
    exercises_by_part,
    chapter_exercises,
    course_map,
)
from .ppo import (  # noqa: F401
    _clip_regions,
    clip_cases_view,
    gae_view,
    clip_epochs_plot,
    loss_and_reward_plot,
)
from .advantages import (  # noqa: F401
    COLORS,
    group_advantage_view,
    difficulty_profile,
    signal_curves,
    useful_share_plot,
)
from .aggregation import (  # noqa: F401
    MODE_LABELS,
    MODE_COLORS,
    aggregation_tables,
    aggregation_bars,
    aggregation_view,
    length_sweep_plot,
    overlong_penalty_plot,
)
from .kl import (  # noqa: F401
    KL_COLORS,
    KL_LABELS,
    kl_estimator_curves,
    kl_drift_table,
    kl_drift_figure,
    kl_drift_view,
    kl_gradient_scatter,
    adaptive_kl_plot,
    adaptive_kl_view,
)
from .ratios import (  # noqa: F401
    COEF_RATIOS,
    COEF_STYLE,
    DPPO_P_OLD,
    FRAMEWORK_PAIRS,
    FRAMEWORK_RATIOS,
    coefficient_specs,
    dppo_coefficient_view,
    framework_coefficient_view,
    coefficient_table,
    grad_coefficient_view,
    gspo_dropout_view,
    clipping_vs_noise_plot,
    SAPO_RATIOS,
    sapo_gate_view,
)
from .mismatch import (  # noqa: F401
    MISMATCH_COLORS,
    mismatch_scatter,
    cap_tradeoff_plot,
    level_plot,
    stale_plot,
)
from .split import split_error_plot  # noqa: F401
from .frameworks import (  # noqa: F401
    normaliser_view,
    trl_side_by_side_plot,
)
from .real_model import (  # noqa: F401,E402
    TOKEN_SCALES,
    TokenView,
    ratio_spread_plot,
    clip_by_lr_plot,
    entropy_by_temperature_plot,
)
from .real_runs import (  # noqa: F401,E402
    run_curves,
    before_after_plot,
    moves_first_plot,
    passk_plot,
    trl_curve_plot,
)
from .lineage import (  # noqa: F401,E402
    band_curves,
    removed_plot,
)
from .lora import (  # noqa: F401,E402
    SETTING_COLOURS,
    sweep_plot,
)
