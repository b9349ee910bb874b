"""From the course's knobs to verl, TRL and OpenRLHF: chapter 09's data and translations.

All of it is data the frameworks themselves check (tests/peers, `make peers`: verl 0.9.1, TRL 1.16.0,
OpenRLHF 0.11.2, the versions in VERSIONS):

    KNOBS, METRICS   each concept / monitor of the course with its name and default in the three
                     frameworks (the defaults are the installed ones: tests/peers/test_knobs.py)
    NORMALISERS      each framework's aggregation setting, expressed through course_lib.aggregation
    to_verl / to_trl / to_openrlhf   a chapter-07 RunConfig -> the settings that run the same recipe at
                     scale; each is composed, constructed or parsed by its framework in
                     tests/peers/test_translations.py and test_semantics.py

plus the notes on where one number means different things, and the reader of the stored peer test
(notebooks/data/verl_agreement.json, written by tests/peers/test_verl_functions.py: verl's functions
and TRL's GRPOTrainer loss code against course_lib).
"""
from __future__ import annotations

import ast
import html
import inspect
import json
import re
import textwrap
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from .aggregation import token_weights
from .masking import check_tensor

FRAMEWORKS = ("verl", "TRL", "OpenRLHF")


# ----------------------------------------------------------------------------------------------
# the knob table
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One framework setting: its name as the framework spells it, its default as a Python literal
    ('0.2', "'token-mean'", 'None'; None: not a setting with a default, e.g. a trainer class), and
    values worth naming."""
    name: str
    default: str | None = None
    values: str | None = None

    def markdown(self) -> str:
        """`name` = `choice`, ... (default `x`; a remark): choices are backticked, remarks are not."""
        out = f"`{self.name}`"
        listed = bool(self.values and "`" in self.values)
        if listed:
            out += f" = {self.values}"
        shown = self.default.strip("'") if self.default is not None else None
        notes = ([f"default `{shown}`"] if self.default is not None else []) + \
                ([self.values] if self.values and not listed else [])
        return out + (f" ({'; '.join(notes)})" if notes else "")


@dataclass(frozen=True)
class Knob:
    concept: str
    chapter: str                          # the notebook that measures it
    verl: tuple[Setting, ...] = ()
    trl: tuple[Setting, ...] = ()
    openrlhf: tuple[Setting, ...] = ()
    note: str = ""                        # where the same number means different things

    def settings(self) -> dict[str, tuple[Setting, ...]]:
        return {"verl": self.verl, "TRL": self.trl, "OpenRLHF": self.openrlhf}


# every name each framework selects, as KNOBS lists them (tests/peers/test_knobs.py reads the installed ones)
VERL_LOSS_MODES = ("`vanilla`, `dppo_tv`, `dppo_kl`, `gspo`, `sapo`, `gpg`, `clip_cov`, `kl_cov`, `geo_mean`, "
                   "`dro`, `cispo`, `bypass_mode`")
VERL_ESTIMATORS = ("`gae`, `grpo`, `reinforce_plus_plus`, `reinforce_plus_plus_baseline`, `remax`, `rloo`, `opo`, "
                   "`grpo_passk`, `gpg`, `rloo_vectorized`, `grpo_vectorized`, `optimal_token_baseline`, "
                   "`tir_optimal_token_baseline`, `gdpo`")
OPENRLHF_ESTIMATORS = ("`gae`, `reinforce`, `rloo`, `reinforce_baseline`, `group_norm`, `dr_grpo`, "
                       "`flash_reinforce`")
TRL_LOSS_TYPES = "`dapo`, `grpo`, `dr_grpo`, `bnpo`, `cispo`, `sapo`, `luspo`, `vespo`"
# each selectable name -> the course_lib function that computes it (checked against the framework's own
# code in tests/peers/test_verl_functions.py)
COURSE_FUNCTIONS = {
    "verl loss_mode": {"vanilla": "losses.ppo_loss", "dppo_tv": "losses.dppo_tv_loss",
                       "dppo_kl": "losses.dppo_kl_loss", "gspo": "losses.gspo_loss", "sapo": "losses.sapo_loss",
                       "gpg": "losses.gpg_loss", "clip_cov": "losses.clip_cov_loss",
                       "kl_cov": "losses.kl_cov_loss", "geo_mean": "losses.gmpo_loss", "dro": "losses.dro_loss",
                       "cispo": "losses.cispo_loss",
                       "bypass_mode": "losses.ppo_loss / losses.cispo_loss / losses.gpg_loss"},
    "verl adv_estimator": {"gae": "advantages.gae", "grpo": "advantages.group_advantages",
                           "grpo_vectorized": "advantages.group_advantages",
                           "reinforce_plus_plus": "advantages.reinforce_pp_advantages",
                           "reinforce_plus_plus_baseline": "advantages.reinforce_pp_baseline_advantages",
                           "remax": "advantages.remax_advantages", "rloo": "advantages.rloo_advantages",
                           "rloo_vectorized": "advantages.rloo_advantages", "opo": "advantages.opo_advantages",
                           "grpo_passk": "advantages.passk_advantages", "gpg": "advantages.gpg_advantages",
                           "optimal_token_baseline": "advantages.optimal_token_baseline_advantages",
                           "tir_optimal_token_baseline": "advantages.tir_optimal_token_baseline_advantages",
                           "gdpo": "advantages.gdpo_advantages"},
    "verl loss_agg_mode": {m: f"aggregation.aggregate(mode={m!r})" for m in
                           ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm",
                            "token-sum")},
    "TRL loss_type": {"grpo": "losses.grpo_loss", "bnpo": "losses.ppo_loss (per micro-batch)",
                      "dr_grpo": "losses.dr_grpo_loss", "dapo": "losses.dapo_loss", "luspo": "losses.luspo_loss",
                      "cispo": "losses.cispo_loss", "sapo": "losses.sapo_loss", "vespo": "losses.vespo_loss"},
}


def listed(values: str) -> list[str]:
    """The backticked names of a Setting's values, unquoted: "`a`, `\"b\"`" -> ['a', 'b']."""
    import re
    return [v.strip('"') for v in re.findall(r"`([^`]+)`", values or "")]


S = Setting
KNOBS: tuple[Knob, ...] = (
    Knob("Group size G", "02_group_advantages",
         verl=(S("actor_rollout_ref.rollout.n", "1"),),
         trl=(S("num_generations", "8"),),
         openrlhf=(S("--rollout.n_samples_per_prompt", "1"),)),
    Knob("Advantage estimator", "01_ppo_clip_and_gae",
         verl=(S("algorithm.adv_estimator", "'gae'", VERL_ESTIMATORS),),
         trl=(S("GRPOTrainer"), S("RLOOTrainer")),
         openrlhf=(S("--algo.advantage.estimator", "'gae'", OPENRLHF_ESTIMATORS),),
         note="verl whitens GAE advantages over the batch (`masked_whiten`); course_lib's `gae` "
              "returns them raw. verl's `rloo` swaps only the advantage; TRL's `RLOOTrainer` also "
              "uses a sequence-level ratio and k1 KL in the reward. TRL has no PPO trainer: GAE needs "
              "verl or OpenRLHF."),
    Knob("Std scaling of the advantage", "02_group_advantages",
         verl=(S("algorithm.norm_adv_by_std_in_grpo", "True"),),
         trl=(S("scale_rewards", "'group'", '`"group"`, `"batch"`, `"none"`'),),
         openrlhf=(S("--algo.advantage.no_std_norm", "False"),),
         note="the epsilon added to the std: 1e-6 in verl, 1e-4 in TRL (both Bessel-corrected)."),
    Knob("Aggregation mode", "03_loss_aggregation",
         verl=(S("actor.loss_agg_mode", "'token-mean'",
                 "`token-mean`, `seq-mean-token-mean`, `seq-mean-token-sum`, `seq-mean-token-sum-norm`, "
                 "`token-sum`"),),
         trl=(S("loss_type", "'dapo'", TRL_LOSS_TYPES),),
         openrlhf=(S("--actor.loss_agg_mode", "'token-mean'", "`token-mean`, `seq-mean-token-mean`"),),
         note='TRL\'s `"dapo"` divides by the generation batch\'s token count spread evenly over its '
              'optimiser steps (`num_items_in_batch` / processes x accumulation steps / `steps_per_generation`), '
              'not by each step\'s own count; `"bnpo"` by the local batch; verl divides by the global batch\'s token count '
              "(`global_batch_info`); `token-sum` adds every token's loss unnormalised. The BNPO paper "
              "(Xiao et al. 2025, arXiv 2506.02864) is another thing: an advantage normalisation, "
              "(R - p(q)) / f(p(q); alpha, beta) with f a Beta density, which TRL does not implement."),
    Knob("Dr. GRPO's constant L_max", "03_loss_aggregation",
         verl=(S("actor.loss_scale_factor", "None", "None: the padded response length"),),
         trl=(S("max_completion_length", "512"),),
         note='TRL `"dr_grpo"` = sum / (B max_completion_length); verl 0.9.1 '
              "`seq-mean-token-sum-norm` = the same 1/(B L) with L = `loss_scale_factor`, by default "
              "the padded length; the January 2026 verl code had no 1/B."),
    Knob("Policy loss", "05_ratios_and_clipping",
         verl=(S("actor.policy_loss.loss_mode", "'vanilla'", VERL_LOSS_MODES),),
         trl=(S("loss_type", "'dapo'", TRL_LOSS_TYPES), S("importance_sampling_level", "'token'",
                                                          "`token`, `sequence`")),
         openrlhf=(S("--actor.policy_loss_type", "'ppo'", "`ppo`, `gspo`"),),
         note="course_lib has each one: `vanilla` is `losses.ppo_loss` (GRPO, DAPO and Dr. GRPO differ only in "
              "their defaults), verl's `geo_mean` is `losses.gmpo_loss`, and `bypass_mode` is no loss of its "
              "own: with pi_old := the sampler's log-probs it runs `vanilla` (`loss_type` `ppo_clip`) or "
              "-sg(min(r, cap)) A log pi (`reinforce`), which is `losses.cispo_loss` with no lower bound, or "
              "`losses.gpg_loss` without an IS weight. TRL's `loss_type` picks the aggregation too; "
              '`"luspo"` expects `importance_sampling_level="sequence"` (a warning otherwise) and `"vespo"` '
              '`"token"` (it builds its sequence weight itself).'),
    Knob("eps_low", "05_ratios_and_clipping",
         verl=(S("actor.clip_ratio_low", "0.2"),),
         trl=(S("epsilon", "0.2"),),
         openrlhf=(S("--actor.eps_clip", "0.2"),)),
    Knob("eps_high (Clip-Higher)", "05_ratios_and_clipping",
         verl=(S("actor.clip_ratio_high", "0.2"),),
         trl=(S("epsilon_high", "None", "then = epsilon"),),
         openrlhf=(S("--actor.eps_clip_low_high", "None", "LOW HIGH; None: both = eps_clip"),),
         note='for `loss_type="cispo"` TRL\'s `epsilon_high` is an absolute cap on the weight, '
              "not a distance from 1."),
    Knob("Dual clip (A < 0)", "05_ratios_and_clipping",
         verl=(S("actor.clip_ratio_c", "3.0"),),
         trl=(S("delta", "None"),),
         openrlhf=(S("--actor.dual_clip", "None"),),
         note="on by default in verl only: its vanilla loss always applies c = 3, so a negative-"
              "advantage token with r > 3 gets no gradient there and does in TRL."),
    Knob("GSPO: sequence-level ratio", "05_ratios_and_clipping",
         verl=(S("actor.policy_loss.loss_mode", "'vanilla'", "`gspo`"),),
         trl=(S("importance_sampling_level", "'token'", '`"sequence"`'),),
         openrlhf=(S("--actor.policy_loss_type", "'ppo'", "`gspo`"),),
         note="verl writes the GSPO-token form and caps the log sequence ratio at 10; in verl 0.9.1 "
              "and TRL alike the aggregation follows the usual setting (`loss_agg_mode`, default "
              "token-mean; `loss_type`), so the paper's per-response mean needs "
              '`loss_agg_mode=seq-mean-token-mean` or `loss_type="grpo"`.'),
    Knob("CISPO's cap", "05_ratios_and_clipping",
         verl=(S("actor.clip_ratio_low", "0.2"), S("actor.clip_ratio_high", "0.2")),
         trl=(S("epsilon_high", None, "absolute cap, rec. 5.0"),),
         note="verl clips the weight to [1 - clip_ratio_low, 1 + clip_ratio_high] ([0.8, 1.2] by "
              "default; its example sets clip_ratio_low = 10 for no lower bound); TRL uses "
              "min(r, epsilon_high) with no lower bound."),
    Knob("SAPO temperatures", "05_ratios_and_clipping",
         verl=(S("actor.tau_pos", "1.0"), S("actor.tau_neg", "1.05")),
         trl=(S("sapo_temperature_pos", "1.0"), S("sapo_temperature_neg", "1.05")),
         note="verl's SAPO ignores `loss_agg_mode` and always uses seq-mean-token-mean (the one loss "
              'of verl 0.9.1 that forces its aggregation); TRL\'s `"sapo"` uses the `"grpo"` '
              "aggregation."),
    Knob("DPPO trust region (dppo_tv, dppo_kl)", "05_ratios_and_clipping",
         verl=(S("actor.clip_ratio_low", "0.2"), S("actor.clip_ratio_high", "0.2"), S("actor.clip_ratio_c", "3.0")),
         note="DPPO reads PPO's clip settings with another meaning: `clip_ratio_low`/`_high` bound the change "
              "of the token's probability (TV) or its Bernoulli KL, not the ratio, and `clip_ratio_c` "
              "truncates the detached weight min(r, c): 3 by default (shared with dual-clip PPO), though the "
              "source's fallback is 20 and its comment recommends a large value."),
    Knob("GMPO (geo_mean) clip in log space", "05_ratios_and_clipping",
         verl=(S("actor.clip_ratio_low", "0.2"), S("actor.clip_ratio_high", "0.2")),
         note="`geo_mean` reads `clip_ratio_low`/`_high` as bounds on log r (r in [e^-0.2, e^0.2] by "
              "default) and ignores `loss_agg_mode`: a plain mean over the micro-batch's responses "
              "(`torch.mean`), without `agg_loss`'s global count or `dp_size`. The engine adds the "
              "micro-batches' losses, so the gradient grows with the number of micro-batches per rank "
              "(chapter 10's \"micro-mean, summed\": x M), and `use_dynamic_bsz` reweights responses by "
              "the size of the micro-batch they land in."),
    Knob("Clip-Cov and KL-Cov", "05_ratios_and_clipping",
         verl=(S("actor.policy_loss.clip_cov_ratio", "0.0002"), S("actor.policy_loss.clip_cov_lb", "1.0"),
               S("actor.policy_loss.clip_cov_ub", "5.0"), S("actor.policy_loss.kl_cov_ratio", "0.0002"),
               S("actor.policy_loss.ppo_kl_coef", "0.1")),
         note="Clip-Cov draws its detached tokens with torch's global generator (a run is reproducible only "
              "with its seed); `ppo_kl_coef` is 0.1 in the config and 1.0 in the source's fallback. Neither "
              "loss has the dual clip."),
    Knob("DRO's penalty", "05_ratios_and_clipping",
         verl=(S("actor.policy_loss.dro_beta", "None", "must be set > 0 with `dro`"),)),
    Knob("VESPO's gamma weight", "05_ratios_and_clipping",
         trl=(S("vespo_k_pos", "2.0"), S("vespo_lambda_pos", "3.0"), S("vespo_k_neg", "3.0"),
              S("vespo_lambda_neg", "2.0")),
         note="VESPO's weight is a function of the product of the response's token ratios (the sum of log r, "
              "not GSPO's mean), and TRL folds its sampler IS ratio into it rather than multiplying the loss."),
    Knob("Discount in the returns (REINFORCE++, GAE)", "02_group_advantages",
         verl=(S("algorithm.gamma", "1.0"), S("algorithm.lam", "1.0")),
         note="REINFORCE++ and REINFORCE++-baseline whiten over the batch's valid tokens (a long response "
              "counts once per token), GDPO again after its group step; ReMax needs no setting (the trainer "
              "samples the greedy baseline when `adv_estimator=remax`)."),
    Knob("GDPO: reward components normalised apart", "02_group_advantages",
         verl=(S("+algorithm.gdpo_reward_keys", None, "the score dict's keys; a new key: `+` in Hydra"),
               S("+algorithm.gdpo_reward_weights")),
         trl=(S("multi_objective_aggregation", "'sum_then_normalize'", "`normalize_then_sum`: GDPO"),
              S("reward_weights", "None"))),
    Knob("Optimal token baseline", "02_group_advantages",
         verl=(S("actor.calculate_sum_pi_squared", "False", "needed by `optimal_token_baseline`"),),
         note="the baseline is per position in verl's `optimal_token_baseline` and per valid token in "
              "`tir_optimal_token_baseline`: they differ only where a response has a masked stretch."),
    Knob("Sampler log-probs as pi_old (bypass mode)", "06_train_inference_mismatch",
         verl=(S("algorithm.rollout_correction.bypass_mode", "False"),
               S("algorithm.rollout_correction.loss_type", "'ppo_clip'", "`reinforce`")),),
    Knob("KL in the loss and its estimator", "04_kl_estimators",
         verl=(S("actor.use_kl_loss", "False"), S("actor.kl_loss_coef", "0.001"),
               S("actor.kl_loss_type", "'low_var_kl'", "`kl`/`k1`, `mse`/`k2`, `low_var_kl`/`k3`")),
         trl=(S("beta", "0.0", "always k3"),
              S("use_bias_correction_kl", "True", "k3 x pi/pi_old: the reverse KL's gradient; False: k3's own")),
         openrlhf=(S("--algo.kl.use_loss", "False"), S("--algo.kl.estimator", "'k1'")),
         note="verl clamps the k3 value to [-10, 10] (gradient 0 beyond); TRL does not clamp. "
              "OpenRLHF's default k1 is meant for the reward: as a loss its expected gradient is 0."),
    Knob("KL in the reward", "04_kl_estimators",
         verl=(S("algorithm.use_kl_in_reward", "False"), S("algorithm.kl_penalty", "'kl'"),
               S("algorithm.kl_ctrl.kl_coef", "0.001")),
         openrlhf=(S("--algo.kl.init_coef", "0.01", "in the reward unless --algo.kl.use_loss"),),
         note="TRL's GRPOTrainer has no in-reward KL (and TRL 1.16.0 no PPO trainer)."),
    Knob("Adaptive KL controller", "04_kl_estimators",
         verl=(S("algorithm.kl_ctrl.type", "'fixed'", "`adaptive`"), S("algorithm.kl_ctrl.target_kl", "0.1"),
               S("algorithm.kl_ctrl.horizon", "10000")),
         openrlhf=(S("--algo.kl.target", "None", "adaptive when set"), S("--algo.kl.horizon", "10000")),
         note="verl measures the batch mean of the per-token-mean KL, Ziegler et al. the per-sequence "
              "sum: the same target_kl is not comparable. The controller acts on the in-reward KL only."),
    Knob("Entropy bonus", "11_long_answers",
         verl=(S("actor.entropy_coeff", "0"),),
         trl=(S("entropy_coef", "0.0"), S("use_adaptive_entropy", "False")),
         openrlhf=(S("--actor.entropy_coef", "None", "None: no entropy computed; 0: logged only"),),
         note="verl and OpenRLHF aggregate the entropy like the policy loss (`agg_loss` / "
              "`aggregate_loss` with the same global counts); TRL always takes the token mean over each "
              "micro-batch, divided by the accumulation steps, whatever `loss_type`."),
    Knob("Epochs and optimiser steps per rollout batch", "07_toy_policy_training",
         verl=(S("actor.ppo_epochs", "1"), S("actor.ppo_mini_batch_size", "256", "prompts")),
         trl=(S("num_iterations", "1"), S("per_device_train_batch_size", "8", "completions"),
              S("gradient_accumulation_steps", "1"), S("steps_per_generation", "None")),
         openrlhf=(S("--train.max_epochs", "1"),),
         note="TRL counts micro-steps: it regenerates every `steps_per_generation` x `num_iterations` "
              "micro-steps and derives `steps_per_generation` = `generation_batch_size` / "
              "(`per_device_train_batch_size` x processes), so a generation batch makes "
              "`steps_per_generation` / `gradient_accumulation_steps` optimiser steps; setting both "
              "`generation_batch_size` and `steps_per_generation` is an error."),
    Knob("Dynamic sampling (DAPO)", "02_group_advantages",
         verl=(S("algorithm.filter_groups.enable", "False"),
               S("algorithm.filter_groups.max_num_gen_batches", "0", "read by no trainer of 0.9.1"),
               S("algorithm.filter_groups.max_inflight_gen_batches", "1", "concurrent generation batches")),
         openrlhf=(S("--algo.dynamic_filtering_enable", "False"),)),
    Knob("Overlong shaping", "03_loss_aggregation",
         verl=(S("reward.reward_manager.name", "'naive'", "`dapo`"),
               S("+reward.reward_kwargs.overlong_buffer_cfg.len", None, "a new key: `+` in Hydra"),
               S("+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor")),
         trl=(S("get_soft_overlong_punishment"), S("mask_truncated_completions", "False")),
         openrlhf=(S("--reward.overlong_buffer_len", "None"), S("--reward.overlong_penalty_factor", "1"),
                   S("--reward.stop_properly_penalty_coef", "None", "a different scheme"))),
    Knob("TIS / MIS: mode and cap", "06_train_inference_mismatch",
         verl=(S("algorithm.rollout_correction.rollout_is", "None", "`token`, `sequence`"),
               S("algorithm.rollout_correction.rollout_is_threshold", "2.0",
                 "a number: TIS cap; `lower_upper`: IcePop mask"),
               S("algorithm.rollout_correction.rollout_rs", "None", "`token_k1`, `seq_sum_k1`, ..."),
               S("actor_rollout_ref.rollout.calculate_log_probs", "True")),
         trl=(S("vllm_importance_sampling_correction", "True"),
              S("vllm_importance_sampling_mode", "'sequence_mask'"),
              S("vllm_importance_sampling_clip_max", "3.0"),
              S("vllm_importance_sampling_clip_min", "None")),
         openrlhf=(S("--algo.advantage.is_correction_level", "'off'", "`token`, `seq`"),
                   S("--algo.advantage.is_correction_mode", "'mask'", "`clip`"),
                   S("--algo.advantage.is_correction_threshold", "[0.5, 5.0]")),
         note="TRL corrects by default whenever it samples with vLLM and keeps masked tokens in the "
              "normaliser; verl corrects only when asked. verl's IcePop form (`rollout_is_threshold` "
              "= `lower_upper`) zeroes the weight and keeps the token in the mask, like TRL and the "
              "toy; its rejection (`rollout_rs`) removes tokens from `response_mask`, so they leave the "
              "token-mean denominator, and its k1 bounds apply to pi_rollout / pi_train."),
    Knob("Learning rate (the policy's AdamW)", "13_grpo_on_a_real_model",
         verl=(S("actor.optim.lr", "1e-6"),),
         trl=(S("learning_rate", "1e-6"),),
         openrlhf=(S("--actor.adam.lr", "1e-6"),),
         note="chapter 13 trains a 135M-parameter model for 30 steps at 2e-5, twenty times these defaults, and "
              "measures what that costs (the gradient-clip share, the KL to the pretrained model)."),
)
del S

VERSIONS = {"verl": "0.9.1", "TRL": "1.16.0", "OpenRLHF": "0.11.2"}   # what KNOBS and the translations state


@dataclass(frozen=True)
class Monitor:
    """A training-curve monitor of the course, the toy's metric keys for it, and the name each
    framework logs it under."""
    concept: str
    chapter: str
    verl: tuple[str, ...] = ()
    trl: tuple[str, ...] = ()
    openrlhf: tuple[str, ...] = ()
    note: str = ""
    course: tuple[str, ...] = ()          # the toy's keys (metrics.METRICS) that measure the same thing

    def settings(self) -> dict[str, tuple[str, ...]]:
        return {"verl": self.verl, "TRL": self.trl, "OpenRLHF": self.openrlhf}


METRICS: tuple[Monitor, ...] = (
    Monitor("Reward", "08_reading_training_curves",
            verl=("critic/score/mean", "critic/rewards/mean"), trl=("reward",),
            note="verl's `critic/rewards` is the score after a KL penalty in the reward, `critic/score` "
                 "before it.", course=("reward/mean",)),
    Monitor("Clip fraction", "05_ratios_and_clipping",
            verl=("actor/pg_clipfrac", "actor/pg_clipfrac_lower"),
            trl=("clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean"),
            note="both count only the tokens whose clip binds (the advantage's sign decides which "
                 "side), not every token outside [1 - eps, 1 + eps]; verl's `_lower` is the dual clip.",
            course=("clip/low_frac", "clip/high_frac")),
    Monitor("KL to the reference", "04_kl_estimators",
            verl=("actor/kl_loss", "actor/reward_kl_penalty"), trl=("kl",), openrlhf=("kl",),
            course=("kl/ref",)),
    Monitor("Entropy", "08_reading_training_curves", verl=("actor/entropy",), trl=("entropy",),
            note="both at the sampling temperature (the logits are divided by it before the "
                 "entropy), like the course's `entropy/mean`.", course=("entropy/mean",)),
    Monitor("Response length", "03_loss_aggregation",
            verl=("response_length/mean",), trl=("completions/mean_length",),
            openrlhf=("rollout/response_length_mean",), course=("len/all",)),
    Monitor("Truncated responses", "08_reading_training_curves",
            verl=("response_length/clip_ratio",), trl=("completions/clipped_ratio",),
            note="verl counts responses whose length equals the budget, TRL those whose last token is "
                 "not an end-of-sequence token, the course those without an end-of-answer token.",
            course=("len/truncated_frac",)),
    Monitor("Groups without signal", "02_group_advantages", trl=("frac_reward_zero_std",),
            note="TRL's `reward_std` is the standard deviation over the whole batch, not within "
                 "groups; the course's `reward/group_std` is the mean within-group one, which neither "
                 "framework logs.", course=("groups/zero_signal_frac",)),
    Monitor("Gradient norm", "08_reading_training_curves",
            verl=("actor/grad_norm",), trl=("grad_norm",), openrlhf=("grad_norm",), course=("grad/norm",)),
    Monitor("Sampler/learner ratio", "06_train_inference_mismatch",
            verl=("rollout_corr/rollout_is_mean", "rollout_corr/rollout_rs_masked_fraction"),
            trl=("sampling/importance_sampling_ratio/mean", "sampling/sampling_logp_difference/max"),
            course=("mismatch/abs_logratio_p99",)),
)


def monitor_of(key: str) -> Monitor | None:
    """The framework monitor that measures the toy's metric ``key``, or None."""
    return next((m for m in METRICS if key in m.course), None)


def verl_key(name: str) -> str:
    """A KNOBS verl name as a full Hydra path (`actor.` is short for `actor_rollout_ref.actor.`)."""
    name = name.lstrip("+")
    return "actor_rollout_ref." + name if name.startswith("actor.") else name


def stated_default(s: Setting):
    """The default a Setting states, as a Python value (its string is a Python literal)."""
    if s.default is None:
        raise ValueError(f"{s.name} states no default")
    try:
        return ast.literal_eval(s.default)
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"{s.name}: default {s.default!r} is not a Python literal") from e


def breakable(md: str) -> str:
    """Markdown with each `code span` as <code> that may wrap after a '.' or '_' (a <wbr>, which adds no
    character: a copied name stays whole), so that the tables' long setting names fit a narrow column."""
    def code(m):
        return "<code>" + re.sub(r"([._])", r"\1<wbr>", html.escape(m.group(1), quote=False)) + "</code>"
    return re.sub(r"`([^`]+)`", code, md)


def _header(first: str) -> list[str]:
    cols = " | ".join(f"{f} {VERSIONS[f]}" for f in FRAMEWORKS)
    return [f"| {first} | {cols} | chapter |", "|---|---|---|---|---|"]


def knob_table_markdown(knobs: Sequence[Knob] = KNOBS) -> str:
    """The knob table as Markdown: concept, the three frameworks' settings (each column names the
    version it was checked against), the chapter."""
    def cell(settings):
        return breakable("<br>".join(s.markdown() for s in settings)) or "—"
    lines = _header("concept")
    for k in knobs:
        lines.append(f"| {k.concept} | {cell(k.verl)} | {cell(k.trl)} | {cell(k.openrlhf)} | "
                     f"[{k.chapter[:2]}]({k.chapter}.ipynb) |")
    return "\n".join(lines)


def metrics_table_markdown(monitors: Sequence[Monitor] = METRICS) -> str:
    """Each monitor of the course and the names the frameworks log it under, as Markdown."""
    def cell(names):
        return breakable("<br>".join(f"`{n}`" for n in names)) or "—"
    lines = _header("monitor")
    for m in monitors:
        lines.append(f"| {m.concept} | {cell(m.verl)} | {cell(m.trl)} | {cell(m.openrlhf)} | "
                     f"[{m.chapter[:2]}]({m.chapter}.ipynb) |")
    return "\n".join(lines)


def notes_markdown(knobs: Sequence = KNOBS + METRICS) -> str:
    """The knobs and monitors whose number means different things in different frameworks, as a
    bullet list."""
    return "\n".join(f"- **{k.concept}**: {k.note}" for k in knobs if k.note)


# ----------------------------------------------------------------------------------------------
# each framework's normaliser, through course_lib.aggregation
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Normaliser:
    framework: str
    setting: str
    mode: str                 # a course_lib.aggregation mode
    scope: str                # "global": one normaliser for the whole batch; "micro-batch": one per
                              # micro-batch, each micro-batch's loss divided by the number of them
    uses_max_len: bool = False

    @property
    def label(self) -> str:
        return f"{self.framework} {self.setting}"


NORMALISERS: tuple[Normaliser, ...] = (
    Normaliser("verl", "token-mean", "token-mean", "global"),
    Normaliser("TRL", "dapo", "token-mean", "global"),
    Normaliser("TRL", "bnpo", "token-mean", "micro-batch"),
    Normaliser("TRL", "grpo", "seq-mean-token-mean", "global"),
    Normaliser("TRL", "dr_grpo", "seq-mean-token-sum-norm", "global", uses_max_len=True),
    Normaliser("OpenRLHF", "token-mean", "token-mean", "global"),
)


def normaliser_weights(norm: Normaliser, mask: Tensor, *, micro_batches: int = 1,
                       max_len: int | None = None) -> Tensor:
    """The weight alpha [B, T] each token gets under a framework's normaliser.

    The rows are split into ``micro_batches`` contiguous equal parts (gradient accumulation); a
    "micro-batch" normaliser aggregates each part on its own and divides by the number of parts, a
    "global" one sees the whole batch. ``max_len`` is Dr. GRPO's constant (TRL's
    max_completion_length); None means the padded length T.
    """
    check_tensor(mask, "mask", ndim=2)
    B = mask.shape[0]
    if not isinstance(micro_batches, int) or isinstance(micro_batches, bool) or micro_batches < 1 \
            or B % micro_batches:
        raise ValueError(f"micro_batches must be a positive int dividing B={B}, got {micro_batches!r}")
    if norm.scope not in ("global", "micro-batch"):
        raise ValueError(f"scope must be 'global' or 'micro-batch', got {norm.scope!r}")
    L = max_len if norm.uses_max_len else None
    if norm.scope == "global":
        return token_weights(mask, norm.mode, L)
    parts = mask.view(micro_batches, B // micro_batches, -1)                  # [M, B/M, T]
    return torch.cat([token_weights(p, norm.mode, L) for p in parts]) / micro_batches   # [B, T]


# ----------------------------------------------------------------------------------------------
# a chapter-07 config at scale
# ----------------------------------------------------------------------------------------------
TRL_AGG = {"token-mean": "dapo", "seq-mean-token-mean": "grpo", "seq-mean-token-sum-norm": "dr_grpo"}
VERL_KL = {"k1": "kl", "k2": "mse", "k3": "low_var_kl"}
A = "actor_rollout_ref.actor."


def resolved_loss_knobs(cfg) -> dict:
    """The loss knobs a RunConfig runs with: the config's own, else the loss function's defaults
    (what the toy trainer passes), plus ``loss`` (its registry name) and ``std_scaling``."""
    from . import losses
    from .rl.loss_step import loss_knobs
    if not isinstance(cfg.loss, str):
        raise ValueError(f"cfg.loss must be a registered loss name to translate, got {cfg.loss!r}")
    fn = losses.resolve_loss(cfg.loss)
    given, agg = loss_knobs(fn, cfg)
    defaults = {n: p.default for n, p in inspect.signature(fn).parameters.items()
                if p.default is not inspect.Parameter.empty}
    knobs = {**defaults, **given, "agg": agg, "loss": cfg.loss}
    knobs["std_scaling"] = (cfg.loss != "dr_grpo") if cfg.std_scaling is None else cfg.std_scaling
    return knobs


MIS_LOWER = 1e-9          # IcePop's lower bound for the course's upper-only MIS: below e^-20, verl's
                          # smallest weight (it clamps |log rho| <= 20, as course_lib does)


# the toy's names where verl's differ (advantage estimators, policy losses)
VERL_ADV = {"reinforce_pp": "reinforce_plus_plus", "reinforce_pp_baseline": "reinforce_plus_plus_baseline",
            "passk": "grpo_passk"}
VERL_MODE = {"ppo": "vanilla", "grpo": "vanilla", "dapo": "vanilla", "dr_grpo": "vanilla", "gmpo": "geo_mean",
             "luspo": "gspo"}
# the knobs of the frameworks' other losses in verl: (verl key under the actor, the loss's keyword)
VERL_CLIP = {"dppo_tv": ("delta_low", "delta_high"), "dppo_kl": ("delta_low", "delta_high")}
VERL_EXTRA = {"dppo_tv": (("clip_ratio_c", "trunc"),), "dppo_kl": (("clip_ratio_c", "trunc"),),
              "dro": (("policy_loss.dro_beta", "beta"),),
              "clip_cov": (("policy_loss.clip_cov_ratio", "cov_ratio"), ("policy_loss.clip_cov_lb", "cov_lb"),
                           ("policy_loss.clip_cov_ub", "cov_ub")),
              "kl_cov": (("policy_loss.kl_cov_ratio", "kl_ratio"), ("policy_loss.ppo_kl_coef", "kl_coef"))}
NO_CLIP = ("gpg", "dro", "kl_cov", "vespo")          # losses without a clip range


def _verl_loss(k, max_len) -> list:
    """The loss rows of to_verl: its mode, its clip range (or DPPO's trust region), its aggregation."""
    loss = k["loss"]
    if loss == "vespo":
        out = [("# policy loss", None, "verl 0.9.1 has no VESPO; TRL runs it (loss_type='vespo')")]
    else:
        out = [(A + "policy_loss.loss_mode", VERL_MODE.get(loss, loss),
                "GSPO with the seq-mean-token-sum aggregation is LUSPO" if loss == "luspo" else "")]
    if loss == "sapo":
        return out + [(A + "tau_pos", k["tau_pos"], ""), (A + "tau_neg", k["tau_neg"], ""),
                      (A + "loss_agg_mode", "seq-mean-token-mean",
                       "verl's SAPO uses this whatever the setting" +
                       ("" if k["agg"] == "seq-mean-token-mean" else f"; the toy run used {k['agg']}"))]
    if loss not in NO_CLIP:
        lo_key, hi_key = VERL_CLIP.get(loss, ("eps_low", "eps_high"))
        low = k[lo_key]
        if loss == "cispo" and low is None:
            low = 10.0
        out += [(A + "clip_ratio_low", low, "no lower bound: 1 - 10 < 0" if loss == "cispo" and
                 k["eps_low"] is None else ""),
                (A + "clip_ratio_high", k[hi_key], "")]
    out += [(A + key, k[name], "") for key, name in VERL_EXTRA.get(loss, ())]
    out.append((A + "loss_agg_mode", k["agg"], "verl's geo_mean ignores it: a mean over each micro-batch's responses, summed over the micro-batches"
                if loss == "gmpo" else ""))
    if k["agg"] == "seq-mean-token-sum-norm":
        out.append((A + "loss_scale_factor", max_len, "L_max"))
    return out


def to_verl(cfg) -> list[tuple[str, object, str]]:
    """A RunConfig -> [(Hydra key, value, note)] for ``python -m verl.trainer.main_ppo`` (verl 0.9.1);
    a key starting with '+' adds a key the base config lacks; one starting with '#' is a note only."""
    k = resolved_loss_knobs(cfg)
    loss = k["loss"]
    out = [("algorithm.adv_estimator", VERL_ADV.get(cfg.adv_estimator, cfg.adv_estimator), ""),
           ("algorithm.norm_adv_by_std_in_grpo", k["std_scaling"], ""),
           ("data.train_batch_size", cfg.prompts_per_step, "prompts per step (P)"),
           ("actor_rollout_ref.rollout.n", cfg.group_size, "G"),
           ("data.max_response_length", cfg.max_new_tokens, ""),
           ("actor_rollout_ref.rollout.temperature", cfg.temperature, ""),
           (A + "optim.lr", cfg.lr, ""),
           (A + "ppo_mini_batch_size", cfg.prompts_per_step // cfg.minibatches,
            f"prompts; {cfg.minibatches} optimiser step(s) per batch"),
           (A + "ppo_epochs", cfg.epochs, "")]
    if cfg.world_size > 1 or cfg.micro_batches > 1:
        out += [("trainer.n_gpus_per_node", cfg.world_size, "data-parallel ranks"), ("trainer.nnodes", 1, "")]
    if cfg.micro_batches > 1:
        out.append((A + "ppo_micro_batch_size_per_gpu", _rows_per_piece(cfg)[1],
                    f"completions; {cfg.micro_batches} micro-batches per optimiser step on each rank"))
        out += _uneven(cfg)
    if cfg.std_scope == "batch":
        out.append(("# advantage std", None, "verl's grpo divides by the group's std; no setting divides by the "
                    "batch's (the toy used std_scope='batch')"))
    mode = VERL_MODE.get(loss, loss)
    out += _verl_loss(k, cfg.max_new_tokens)
    if mode == "vanilla":
        c = k.get("dual_clip")
        out.append((A + "clip_ratio_c", 1e9 if c is None else c,
                    "always on in verl; a huge c turns it off" if c is None else ""))
    if cfg.entropy_coef:
        out.append((A + "entropy_coeff", cfg.entropy_coef, "aggregated like the policy loss, as in the toy"))
    if cfg.kl_coef > 0:
        out += [(A + "use_kl_loss", True, ""), (A + "kl_loss_coef", cfg.kl_coef, ""),
                (A + "kl_loss_type", VERL_KL[cfg.kl_estimator], cfg.kl_estimator)]
    if cfg.dynamic_sampling:
        out += [("algorithm.filter_groups.enable", True, ""),
                ("algorithm.filter_groups.metric", "acc", ""),
                ("# max sampling rounds", None,
                 f"the toy draws at most {cfg.max_sampling_rounds} batches; verl 0.9.1's trainer reads no "
                 "such bound (it warns that filter_groups.max_num_gen_batches is ignored)")]
    if cfg.overlong_penalty:
        kw = "+reward.reward_kwargs."
        out += [("reward.reward_manager.name", "dapo", "the reward manager that applies it"),
                (kw + "max_resp_len", cfg.max_new_tokens, ""),
                (kw + "overlong_buffer_cfg.enable", True, ""),
                (kw + "overlong_buffer_cfg.len", cfg.overlong_cache, ""),
                (kw + "overlong_buffer_cfg.penalty_factor", 1.0, ""),
                (kw + "overlong_buffer_cfg.log", False, "")]
    if cfg.mask_truncated:
        out.append(("# truncated responses", None, "verl 0.9.1 has no setting that drops them from the loss "
                    "(the toy's mask_truncated)"))
    out += _format_note(cfg)
    if cfg.correction != "none":
        out += [("actor_rollout_ref.rollout.calculate_log_probs", True, "the sampler's log-probs"),
                ("algorithm.rollout_correction.rollout_is", cfg.correction_level, "")]
        if cfg.correction == "tis":
            out.append(("algorithm.rollout_correction.rollout_is_threshold", cfg.correction_cap, ""))
        else:
            out.append(("algorithm.rollout_correction.rollout_is_threshold",
                        f"{MIS_LOWER:g}_{cfg.correction_cap:g}",
                        "IcePop: weight 0 outside [lower, upper], the token stays in the mask; a lower "
                        "bound under e^-20 is none"))
    if cfg.old_logp_source == "sampler":
        out.append(("algorithm.rollout_correction.bypass_mode", True, "pi_old := the sampler's log-probs"))
        if mode == "vanilla":
            out[out.index((A + "policy_loss.loss_mode", mode, ""))] = (
                A + "policy_loss.loss_mode", "bypass_mode", "")
            out.append(("algorithm.rollout_correction.loss_type", "ppo_clip", "ratio pi_theta / pi_rollout"))
        else:
            out.append(("# bypass", None, f"bypass mode has its own loss (ppo_clip/reinforce); "
                        f"no verl setting runs {loss} there"))
    return out + _lora(cfg, "verl") + _mismatch_note(cfg) + not_translated(cfg, "verl")


def _mismatch_note(cfg) -> list:
    if cfg.mismatch == "stale":
        return [("# stale sampler", None, f"{cfg.stale_steps} optimiser step(s) behind in the toy; "
                 "asynchronous rollout at scale")]
    if cfg.mismatch in ("noise", "bf16"):
        how = f"noise, s = {cfg.logits_noise:g}" if cfg.mismatch == "noise" else "bf16"
        return [("# mismatch", None, f"faked in the toy ({how}); at scale the engine's "
                 "kernels and precision make it")]
    if cfg.sampler_precision not in (None, cfg.precision):
        return [("# sampler precision", None, f"the toy samples in {cfg.sampler_precision} and learns in "
                 f"{cfg.precision}; at scale the engine's dtype and kernels against the trainer's")]
    return []


# Every RunConfig field a translation carries over where it takes effect, as a setting or as a note saying
# the framework has none; each other field that differs from its default is named in a "# not translated"
# note (tests/test_frameworks_knobs.py changes every field and checks that each translation changes).
_CARRIED = frozenset({
    "prompts_per_step", "group_size", "max_new_tokens", "temperature", "lr", "minibatches", "micro_batches",
    "world_size", "epochs", "loss", "agg", "eps_low", "eps_high", "dual_clip", "entropy_coef", "adv_estimator",
    "std_scaling", "std_scope", "kl_coef", "kl_estimator", "dynamic_sampling", "overlong_penalty",
    "overlong_cache", "mask_truncated", "format_weight", "mismatch", "logits_noise", "stale_steps",
    "old_logp_source", "correction", "correction_level", "correction_cap", "sampler_precision"})
LORA_FIELDS = frozenset({"lora_rank", "lora_alpha", "lora_targets"})
CARRIED = {"verl": _CARRIED | LORA_FIELDS | {"tau_pos", "tau_neg", "max_sampling_rounds"},
           "TRL": _CARRIED | LORA_FIELDS | {"tau_pos", "tau_neg", "lr_schedule", "lr_min", "warmup_steps",
                                            "grad_clip"},
           "OpenRLHF": _CARRIED | LORA_FIELDS}


def _lora(cfg, framework: str) -> list:
    """LoRA's settings in ``framework`` for a run of the LoRA policy (``lm.lora``; peft in every one of them):
    verl's ``actor_rollout_ref.model.lora_*`` (its alpha defaults to 16), OpenRLHF's ``--ds.lora.*``, and for
    TRL a peft ``LoraConfig`` handed to the trainer, not to GRPOConfig."""
    if "lora_rank" not in cfg.stored_fields():
        return []
    peft = peft_lora_kwargs(cfg)
    r, alpha, modules = peft["r"], peft["lora_alpha"], peft["target_modules"]
    if framework == "verl":
        m = "actor_rollout_ref.model."
        return [(m + "lora_rank", r, "adapters on the actor; 0 is full fine-tuning"),
                (m + "lora_alpha", alpha, "verl's default is 16"), (m + "target_modules", modules, "")]
    if framework == "OpenRLHF":
        whole = float(alpha).is_integer()
        return [("--ds.lora.rank", r, ""),
                ("--ds.lora.alpha", int(alpha) if whole else alpha,
                 "" if whole else "OpenRLHF's parser takes an integer: round it, or scale the rank with it"),
                ("--ds.lora.target_modules", [modules] if isinstance(modules, str) else modules, "")]
    kw = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in peft.items())
    return [("# peft_config", None, f"GRPOTrainer(..., peft_config=LoraConfig({kw})): a trainer argument, not "
             f"a GRPOConfig setting")]


def peft_lora_kwargs(cfg) -> dict:
    """peft's ``LoraConfig`` keywords for a run of the LoRA policy: what ``lm.lora`` builds, and what TRL's
    ``GRPOTrainer(peft_config=...)`` is given (``benchmarks/trl_real.py``, ``make peers``)."""
    from .lm.lora import peft_kwargs
    return peft_kwargs(cfg.lora_rank, cfg.lora_alpha, cfg.lora_targets)


def not_translated(cfg, framework: str) -> list:
    """The note naming every field of ``cfg`` that differs from RunConfig's default and that the
    translation for ``framework`` does not carry: the toy's own (task, model, warm start, evaluation) or
    knobs the framework's translation leaves to the reader."""
    from dataclasses import fields
    from .rl.config import RunConfig
    base = RunConfig()
    left = [f"{f.name}={getattr(cfg, f.name)!r}" for f in fields(RunConfig)
            if f.name not in CARRIED[framework] and getattr(cfg, f.name) != getattr(base, f.name)]
    return [("# not translated", None, ", ".join(left))] if left else []


def _rows_per_piece(cfg) -> tuple[int, int]:
    """(completions per optimiser step on one rank, completions per micro-batch) of a RunConfig."""
    per_rank = cfg.batch_size // (cfg.minibatches * cfg.world_size)
    return per_rank, per_rank // cfg.micro_batches


def _uneven(cfg) -> list:
    per_rank, _ = _rows_per_piece(cfg)
    if per_rank % cfg.micro_batches:
        return [("# micro-batches", None, f"the toy cuts {per_rank} rows into {cfg.micro_batches} uneven pieces; "
                 "the frameworks take one size per micro-batch")]
    return []


def _format_note(cfg) -> list:
    if not cfg.format_weight:
        return []
    return [("# reward", None, f"the toy adds {cfg.format_weight:g} x the task's format check (0/1) to the "
             "correctness reward: write both terms into the reward function")]


def _trl_optimiser(cfg) -> list:
    """The toy's optimiser in transformers' TrainingArguments (which GRPOConfig extends): AdamW with
    betas (0.9, 0.99), no weight decay, the gradient clipped at grad_clip, a linear warm-up, then a
    constant or cosine learning rate (left at their defaults, TRL would decay it linearly to 0)."""
    out = [("lr_scheduler_type", "constant_with_warmup" if cfg.lr_schedule == "constant" else "cosine_with_min_lr",
            ""),
           ("warmup_steps", cfg.warmup_steps,
            "optimiser steps; TRL's warm-up starts at lr 0, the toy's at lr / warmup_steps")]
    if cfg.lr_schedule == "cosine":
        out.append(("lr_scheduler_kwargs", {"min_lr": cfg.lr_min}, ""))
    from .rl.trainer import ADAM_BETAS, WEIGHT_DECAY
    return out + [("adam_beta2", ADAM_BETAS[1], ""), ("weight_decay", WEIGHT_DECAY, ""),
                  ("max_grad_norm", cfg.grad_clip, "")]


# what TRL 1.16.0's GRPOTrainer lacks of the toy's losses and advantage estimators
TRL_NO_LOSS = ("gpg", "dppo_tv", "dppo_kl", "gmpo", "dro", "clip_cov", "kl_cov")
TRL_NO_ADV = {"reinforce_pp": "TRL has no REINFORCE++ advantage (verl: reinforce_plus_plus)",
              "reinforce_pp_baseline": "TRL has no REINFORCE++-baseline; scale_rewards='batch' is close "
                                       "(the group mean, the batch's std over responses, not tokens)",
              "remax": "TRL has no ReMax (verl: remax, one greedy rollout per prompt)",
              "opo": "TRL has no OPO advantage (verl: opo)", "passk": "TRL has no pass@k advantage "
                                                                      "(verl: grpo_passk)",
              "gpg": "TRL has no GPG advantage (verl: gpg)"}


def to_trl(cfg) -> list[tuple[str, object, str]]:
    """A RunConfig -> [(GRPOConfig keyword, value, note)] (TRL 1.16.0); a key starting with '#' is a
    note only (no TRL setting does it).

    The batch: one generation batch of B = P G completions, split into ``minibatches`` optimiser steps,
    each of ``micro_batches`` accumulated micro-batches on each of ``world_size`` processes
    (``per_device_train_batch_size`` = B / (minibatches x micro_batches x world_size),
    ``gradient_accumulation_steps`` = micro_batches), ``epochs`` passes (``num_iterations``). TRL then
    derives ``steps_per_generation`` = minibatches x micro_batches itself (setting it as well is an error).
    """
    k = resolved_loss_knobs(cfg)
    loss = k["loss"]
    B = cfg.batch_size
    if B % cfg.minibatches:
        raise ValueError(f"cfg.minibatches={cfg.minibatches} must divide the batch B={B}")
    per_rank, per_micro = _rows_per_piece(cfg)
    where = f" on each of {cfg.world_size} processes" if cfg.world_size > 1 else ""
    out = [("num_generations", cfg.group_size, "G"),
           ("generation_batch_size", B, "B = P * G completions per rollout"),
           ("per_device_train_batch_size", per_micro,
            f"completions per micro-batch{where} ({cfg.minibatches} optimiser step(s) per batch"
            + (")" if cfg.world_size > 1 or cfg.micro_batches > 1 else "; divide by processes)")),
           ("gradient_accumulation_steps", cfg.micro_batches, ""),
           ("num_iterations", cfg.epochs, "passes over each generation batch"),
           ("max_completion_length", cfg.max_new_tokens, ""),
           ("temperature", cfg.temperature, ""),
           ("learning_rate", cfg.lr, ""),
           ("scale_rewards", cfg.std_scope if k["std_scaling"] else "none", "")]
    if cfg.world_size > 1:
        out.append(("# processes", None, f"launch on {cfg.world_size} (accelerate launch --num_processes "
                    f"{cfg.world_size})"))
    out += _uneven(cfg)
    if cfg.minibatches > 1 and k["agg"] == "token-mean":
        out.append(("# token count", None, "with several optimiser steps per generation batch, TRL's dapo divides "
                    "each by the generation batch's tokens / steps, not the step's own count as verl and the toy "
                    "do: steps with longer responses weigh more"))
    out += _trl_optimiser(cfg)
    if cfg.adv_estimator == "rloo":
        out.append(("# RLOOTrainer", None, "TRL's RLOO is its own trainer with a sequence-level ratio"))
    elif cfg.adv_estimator != "grpo":
        out.append(("# advantage", None, TRL_NO_ADV[cfg.adv_estimator]))
    if loss in TRL_NO_LOSS:
        out.append(("# policy loss", None, f"TRL 1.16.0 has no {loss} loss"))
        out.append(("loss_type", TRL_AGG[k["agg"]], k["agg"]) if k["agg"] in TRL_AGG else
                   ("# aggregation", None, f"TRL has no loss_type for {k['agg']}"))
    elif loss == "vespo":
        out += [("loss_type", "vespo", "aggregated like dapo: token-mean")]
        out += [(f"vespo_{name}", k[name], "") for name in ("k_pos", "lambda_pos", "k_neg", "lambda_neg")]
        if k["agg"] != "token-mean":
            out.append(("# aggregation", None, f"TRL's vespo uses dapo's; the toy used {k['agg']}"))
    elif loss == "luspo":
        out += [("loss_type", "luspo", "GSPO's loss times the response length"),
                ("epsilon", k["eps_low"], ""), ("epsilon_high", k["eps_high"], ""),
                ("importance_sampling_level", "sequence", "")]
        if k["agg"] != "seq-mean-token-sum":
            out.append(("# aggregation", None, f"TRL's luspo sums each response; the toy used {k['agg']}"))
    elif loss in ("cispo", "sapo"):
        out.append(("loss_type", loss, ""))
        if loss == "cispo":
            out.append(("epsilon_high", 1 + k["eps_high"], "an absolute cap: 1 + the toy's eps_high"))
            if k["eps_low"] is not None:
                out.append(("# no lower bound", None, f"TRL's CISPO has none; the toy used {k['eps_low']}"))
            if k["agg"] != "token-mean":
                out.append(("# aggregation", None, f"TRL's cispo uses dapo's; the toy used {k['agg']}"))
        else:
            out += [("sapo_temperature_pos", k["tau_pos"], ""),
                    ("sapo_temperature_neg", k["tau_neg"], "")]
            if k["agg"] != "seq-mean-token-mean":
                out.append(("# aggregation", None, f"TRL's sapo uses grpo's; the toy used {k['agg']}"))
    else:
        if k["agg"] in TRL_AGG:
            out.append(("loss_type", TRL_AGG[k["agg"]], k["agg"]))
        else:
            out.append(("# aggregation", None, f"TRL has no loss_type for {k['agg']}"))
        out += [("epsilon", k["eps_low"], ""), ("epsilon_high", k["eps_high"], "")]
        if loss == "gspo":
            out.append(("importance_sampling_level", "sequence", ""))
        if k.get("dual_clip") is not None:
            out.append(("delta", k["dual_clip"], "two-sided clip: bounds r for A < 0"))
    if cfg.entropy_coef:
        out.append(("entropy_coef", cfg.entropy_coef, "" if k["agg"] == "token-mean" else
                    f"TRL's bonus is a token mean whatever loss_type; the toy aggregated it by {k['agg']}"))
    if cfg.mask_truncated:
        out.append(("mask_truncated_completions", True, "still in their group's advantage, as in the toy"))
    if cfg.format_weight:
        out += [("reward_weights", [1.0, cfg.format_weight], "reward_funcs=[correctness, format check]")]
    if cfg.kl_coef > 0:
        out.append(("beta", cfg.kl_coef, "always k3"))
        out.append(("use_bias_correction_kl", False,
                    "TRL's default True multiplies k3 by the ratio (the reverse KL's gradient); "
                    "the toy's k3 has k3's own"))
        if cfg.kl_estimator != "k3":
            out.append(("# KL estimator", None, f"TRL's GRPO has only k3; the toy used {cfg.kl_estimator}"))
    if cfg.dynamic_sampling:
        out.append(("# dynamic sampling", None, "not supported by TRL's GRPOTrainer"))
    if cfg.overlong_penalty:
        out.append(("# reward_funcs", None, "add trl.rewards.get_soft_overlong_punishment("
                    f"max_completion_len={cfg.max_new_tokens}, soft_punish_cache={cfg.overlong_cache})"))
    out.append(("use_vllm", True, "a separate sampler, as at scale"))
    if cfg.correction == "none":
        out.append(("vllm_importance_sampling_correction", False, "on by default in TRL"))
    else:
        mode = {"tis": "truncate", "mis": "mask"}[cfg.correction]
        out += [("vllm_importance_sampling_correction", True, ""),
                ("vllm_importance_sampling_mode", f"{cfg.correction_level}_{mode}", ""),
                ("vllm_importance_sampling_clip_max", cfg.correction_cap, "")]
    if cfg.old_logp_source == "sampler":
        out.append(("# pi_old", None, "TRL always recomputes pi_old with the trainer"))
    return out + _lora(cfg, "TRL") + _mismatch_note(cfg) + not_translated(cfg, "TRL")


OPENRLHF_ADV = {"grpo": "group_norm", "rloo": "rloo", "reinforce_pp": "reinforce",
                "reinforce_pp_baseline": "reinforce_baseline"}
O = "--algo."


def to_openrlhf(cfg) -> list[tuple[str, object, str]]:
    """A RunConfig -> [(command-line flag, value, note)] for OpenRLHF 0.11.2's
    ``openrlhf.cli.train_ppo_ray``; value True is a bare switch, a list is several values, a key
    starting with '#' is a note only."""
    k = resolved_loss_knobs(cfg)
    loss = k["loss"]
    std = k["std_scaling"]
    est = "dr_grpo" if cfg.adv_estimator == "grpo" and not std else OPENRLHF_ADV.get(cfg.adv_estimator)
    if est is None:
        out = [("# advantage", None, f"OpenRLHF has no {cfg.adv_estimator} estimator")]
    else:
        out = [(O + "advantage.estimator", est, "")]
    if not std and est not in ("dr_grpo", None):
        out.append((O + "advantage.no_std_norm", True, ""))
    out += [("--rollout.batch_size", cfg.prompts_per_step, "prompts per step (P)"),
            ("--rollout.n_samples_per_prompt", cfg.group_size, "G"),
            ("--train.batch_size", cfg.batch_size // cfg.minibatches,
             f"completions per optimiser step ({cfg.minibatches} per batch)"),
            ("--train.max_epochs", cfg.epochs, ""),
            ("--rollout.max_new_tokens", cfg.max_new_tokens, ""),
            ("--rollout.temperature", cfg.temperature, ""),
            ("--actor.adam.lr", cfg.lr, "")]
    if cfg.micro_batches > 1 or cfg.world_size > 1:
        out += [("--actor.num_nodes", 1, ""), ("--actor.num_gpus_per_node", cfg.world_size, "data-parallel ranks")]
        out.append(("--train.micro_batch_size", _rows_per_piece(cfg)[1], "completions per micro-batch per GPU"))
        out += _uneven(cfg)
    if cfg.std_scope == "batch":
        out.append(("# advantage std", None, "OpenRLHF's group_norm divides by the group's std; no setting divides "
                    "by the batch's (the toy used std_scope='batch')"))
    if cfg.entropy_coef:
        out.append(("--actor.entropy_coef", cfg.entropy_coef, "aggregated like the policy loss, as in the toy"))
    if cfg.mask_truncated:
        out.append(("# truncated responses", None, "OpenRLHF has no setting that drops them from the loss "
                    "(--reward.stop_properly_penalty_coef changes their reward instead)"))
    out += _format_note(cfg)
    if loss not in ("ppo", "grpo", "dapo", "dr_grpo", "gspo"):
        out.append(("# policy loss", None, f"OpenRLHF has no {loss} loss (ppo, gspo only)"))
    else:
        if loss == "gspo":
            out.append(("--actor.policy_loss_type", "gspo", ""))
        out.append(("--actor.eps_clip_low_high", [k["eps_low"], k["eps_high"]], ""))
        if k.get("dual_clip") is not None:
            out.append(("--actor.dual_clip", k["dual_clip"], ""))
    if k["agg"] in ("token-mean", "seq-mean-token-mean"):
        out.append(("--actor.loss_agg_mode", k["agg"], ""))
    else:
        out.append(("# aggregation", None, f"OpenRLHF has token-mean and seq-mean-token-mean only; "
                    f"the toy used {k['agg']}"))
    if cfg.kl_coef > 0:
        out += [(O + "kl.use_loss", True, ""), (O + "kl.init_coef", cfg.kl_coef, ""),
                (O + "kl.estimator", cfg.kl_estimator, "")]
    else:
        out.append((O + "kl.init_coef", 0.0, "the default 0.01 puts a KL in the reward"))
    if cfg.dynamic_sampling:
        out += [(O + "dynamic_filtering_enable", True, "needs a remote reward or an agent function"),
                (O + "dynamic_filtering_range", [0.0, 1.0], "keep groups whose mean reward is inside")]
    if cfg.overlong_penalty:
        out += [("--reward.overlong_buffer_len", cfg.overlong_cache, ""),
                ("--reward.overlong_penalty_factor", 1.0, "")]
    if cfg.correction != "none":
        if cfg.correction_level == "sequence":
            out.append(("# correction", None, "OpenRLHF's seq level gates the geometric mean of the "
                        "ratios, not their product; no flag runs the toy's sequence-level weight"))
        else:
            out += [(O + "advantage.is_correction_level", "token", ""),
                    (O + "advantage.is_correction_mode", "clip" if cfg.correction == "tis" else "mask",
                     ""),
                    (O + "advantage.is_correction_threshold", [0.0, cfg.correction_cap],
                     "LOW HIGH; 0: no lower bound")]
    if cfg.old_logp_source == "sampler":
        out.append(("# pi_old", None, "OpenRLHF recomputes pi_old with the trainer"))
    return out + _lora(cfg, "OpenRLHF") + _mismatch_note(cfg) + not_translated(cfg, "OpenRLHF")


def translation_cases() -> dict:
    """Every configuration the course translates, by label: the sizes, every named loss, every
    chapter-07 comparison variant, each correction (TIS, MIS; token, sequence), dynamic sampling, the
    overlong penalty, the KL in the loss with each estimator, dual clip, several optimiser steps and
    epochs per batch, and chapters 10 and 11's knobs (micro-batches, ranks, the entropy bonus, the batch
    std, a format reward, masked truncated responses), and LoRA on the real model. The peers tests hand each
    one to verl, TRL and OpenRLHF."""
    from dataclasses import replace
    from . import losses
    from .rl.config import SIZES, make_config
    from .toy.experiments import COMPARISONS
    base = make_config("smoke")
    cases = {f"size {size}": make_config(size) for size in SIZES}
    cases.update({f"loss {name}": replace(base, loss=name) for name in losses.LOSSES})
    for name, comp in COMPARISONS.items():
        cases.update({f"{name}: {label}": c for label, c in comp.configs(base, seed=base.seed).items()})
    for kind in ("tis", "mis"):
        for level in ("token", "sequence"):
            cases[f"{kind} {level}"] = replace(base, correction=kind, correction_level=level,
                                               correction_cap=2.0)
    cases.update({f"kl {e}": replace(base, kl_coef=0.01, kl_estimator=e) for e in ("k1", "k2", "k3")})
    cases["dynamic sampling"] = replace(base, dynamic_sampling=True)
    cases["overlong penalty"] = replace(base, overlong_penalty=True, overlong_cache=3)
    cases["dual clip 3"] = replace(base, loss="ppo", dual_clip=3.0)
    cases["4 minibatches, 2 epochs"] = replace(base, minibatches=4, epochs=2)
    cases["dr_grpo with std"] = replace(base, loss="dr_grpo", std_scaling=True)
    # chapters 10 and 11: the split, the entropy bonus, the batch std, a second reward term, masking
    long = make_config("long")
    cases["2 micro-batches"] = replace(base, micro_batches=2)
    cases["2 ranks x 2 micro-batches, 2 minibatches"] = replace(base, world_size=2, micro_batches=2, minibatches=2)
    cases["entropy bonus"] = replace(long, entropy_coef=0.01)
    cases["entropy bonus, token-mean"] = replace(long, entropy_coef=0.01, agg="token-mean")
    cases["batch std"] = replace(long, std_scope="batch")
    cases["format reward"] = replace(long, format_weight=0.5)
    cases["mask truncated"] = replace(long, mask_truncated=True)
    # LoRA on the real model (lm.lora): every linear layer, and two named ones at another rank and alpha
    cases["LoRA rank 1"] = make_config("real", policy="smollm2_lora")
    cases["LoRA rank 4, q and v, alpha 8"] = make_config("real", policy="smollm2_lora", lora_rank=4,
                                                        lora_alpha=8.0, lora_targets=("q_proj", "v_proj"))
    return cases


WIDTH = 100    # the longest printed line: JupyterLab's output column at 1366 px wraps longer ones


def _commented(indent: str, code: str, note: str, width: int = WIDTH) -> list[str]:
    """``code`` with ``note`` as a trailing comment when the line fits in ``width``; otherwise the
    note as comment lines of its own above ``code`` (every line stays valid where it is pasted)."""
    if not note:
        return [indent + code]
    if len(f"{indent}{code}  # {note}") <= width:
        return [f"{indent}{code}  # {note}"]
    return _comment(f"{indent}# ", note, width) + [indent + code]


def _comment(lead: str, text: str, width: int = WIDTH) -> list[str]:
    """``lead`` + ``text`` wrapped to ``width``; continuation lines are comments indented two more."""
    return textwrap.wrap(text, width, initial_indent=lead, subsequent_indent=lead + "  ",
                         break_on_hyphens=False, break_long_words=False)


def _fmt(v) -> str:
    return repr(v) if isinstance(v, str) else (f"{v:g}" if isinstance(v, float) else str(v))


def _hydra(v) -> str:
    """A value as a Hydra override writes it: strings that Hydra would read as a number (an IcePop
    '1e-09_2') are quoted; a list is [a,b] without spaces."""
    if isinstance(v, list):
        return "[" + ",".join(_hydra(x) for x in v) + "]"
    if isinstance(v, str):
        try:
            float(v)
        except ValueError:
            return v
        return f"'{v}'"
    return _fmt(v)


def verl_text(cfg) -> str:
    """Hydra overrides, one a line, ready to paste after ``python -m verl.trainer.main_ppo``."""
    rows = to_verl(cfg)
    lines = [f"{key}={_hydra(v)}" for key, v, _ in rows if key[0] != "#"]
    notes = [line for key, _, note in rows if note for line in _comment("#   ", f"{key.lstrip('#+ ')}: {note}")]
    return " \\\n".join(lines) + ("\n# notes:\n" + "\n".join(notes) if notes else "")


def _arg(v) -> str:
    return v if isinstance(v, str) else _fmt(v)


def openrlhf_args(cfg) -> list[str]:
    """The flags of ``to_openrlhf`` as an argument list (what the shell passes to its parser)."""
    args = []
    for key, v, _ in to_openrlhf(cfg):
        if key.startswith("#"):
            continue
        args.append(key)
        if v is not True:
            args += [_arg(x) for x in v] if isinstance(v, list) else [_arg(v)]
    return args


def openrlhf_text(cfg) -> str:
    """The flags, one a line, to paste after ``python -m openrlhf.cli.train_ppo_ray``; notes last."""
    rows = to_openrlhf(cfg)
    lines = []
    for key, v, _ in rows:
        if not key.startswith("#"):
            value = "" if v is True else " " + " ".join(_arg(x) for x in (v if isinstance(v, list) else [v]))
            lines.append(key + value)
    notes = [line for key, _, note in rows if note for line in _comment("#   ", f"{key.lstrip('#- ')}: {note}")]
    return " \\\n".join(lines) + ("\n# notes:\n" + "\n".join(notes) if notes else "")


def trl_text(cfg) -> str:
    """``GRPOConfig(...)`` as Python source; settings TRL lacks appear as comments."""
    lines = ["GRPOConfig("]
    for key, v, note in to_trl(cfg):
        if key.startswith("#"):
            lines += _comment("    # ", f"{key[1:].strip()}: {note}")
        else:
            lines += _commented("    ", f"{key}={_fmt(v)},", note)
    return "\n".join(lines + [")"])


def variant_diff(rows_by_label: dict[str, list]) -> tuple[list, dict[str, list]]:
    """Settings shared by every variant, and per variant the ones that differ from the first's."""
    first = list(rows_by_label.values())[0]
    shared = [r for r in first if all(r in rows for rows in rows_by_label.values())]
    return shared, {label: [r for r in rows if r not in shared] for label, rows in rows_by_label.items()}


# ----------------------------------------------------------------------------------------------
# the stored peer test
# ----------------------------------------------------------------------------------------------
GSPO_TOKEN_CHECK = "loss: GSPO, token-level IS weight (value only; gradients differ, see chapter 09)"
TRL_SAPO_CHECK = "TRL loss_type=sapo (TRL's temperature 1.05 in float32)"
GDPO_CHECKS = tuple(f"advantage: GDPO (2 components, weights 1 and 0.5{s}; verl reads them in float32)"
                    for s in ("", ", unscaled"))
# check -> the fields allowed to exceed the tolerance, with the reason
DOCUMENTED_DIFFERENCES = {
    GSPO_TOKEN_CHECK: ("grad", "verl's GSPO-token form gives each token its own IS weight inside the "
                               "sequence ratio's gradient; course_lib's sequence form applies the "
                               "weight to the loss. Same loss value, different gradients."),
    **{name: ("value", "verl reads each GDPO reward component as float32 (np.float32) and normalises it "
                       "in float32: agreement to float32's precision (the test allows 1e-5).")
       for name in GDPO_CHECKS},
    TRL_SAPO_CHECK: ("value", "TRL builds SAPO's temperatures as a float32 tensor, so its 1.05 is "
                              "1.0499999523; with temperatures exact in float32 (1, 1.25) the two agree "
                              "to float64's precision."),
}


def load_agreement(path) -> dict:
    """Read the peer test's stored result -> {"verl", "torch", "checks": {name: {"value", "grad"}}}."""
    with open(path) as f:
        data = json.load(f)
    if not {"verl", "checks"} <= set(data):
        raise ValueError(f"{path} is not a peer-test record (needs 'verl' and 'checks')")
    return data


def agreement_failures(checks: dict, tol: float = 1e-8) -> list[str]:
    """Every (check, field) whose largest difference exceeds ``tol`` and is not documented."""
    bad = []
    for name, diffs in checks.items():
        for field in ("value", "grad"):
            d = diffs.get(field)
            allowed = DOCUMENTED_DIFFERENCES.get(name, (None,))[0] == field
            if d is not None and not d <= tol and not allowed:
                bad.append(f"{name} [{field}] = {d:.2e}")
    return bad


def comparison_text(comp, base, framework: str) -> str:
    """One chapter-07 comparison in one framework: per variant, the settings that differ from what
    every variant shares (``verl_text`` / ``trl_text`` give a variant's full list)."""
    return variants_text(comp.configs(base, seed=base.seed), framework)


def variants_text(configs: dict, framework: str) -> str:
    """Configs {label: RunConfig} in one framework ("verl" or "TRL"): the number of settings every variant
    shares, then per variant the settings that differ from them."""
    if framework not in ("verl", "TRL"):
        raise ValueError(f"framework must be 'verl' or 'TRL', got {framework!r}")
    fn = to_verl if framework == "verl" else to_trl
    shared, diff = variant_diff({label: fn(c) for label, c in configs.items()})

    def lines(key, v, note):
        if key.startswith("#"):
            return _comment("    # ", f"{key.lstrip('# ')}: {note}")
        value = _hydra(v) if framework == "verl" else _fmt(v)
        return _commented("    ", f"{key}={value}", note)

    out = [f"[{framework}] {len(shared)} settings shared by every variant; the rest:"]
    for label, rows in diff.items():
        out.append(f"  {label}:")
        out += [line for r in rows for line in lines(*r)] or ["    (nothing else)"]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------
# the toy trained by TRL's GRPOTrainer (benchmarks/trl_toy.py; tests/peers/test_trl_toy.py)
# ----------------------------------------------------------------------------------------------
TRL_RUN_KEYS = {"config", "trl_config", "environment", "runs", "repeats", "step_time_ratio", "step_time_ratio_p10"}


def load_trl_run(path) -> dict:
    """Read benchmarks/trl_toy.py's stored run -> its record, with ``toy_config`` (the RunConfig both
    trainers ran) added. Per trainer (``runs["course"]``, ``runs["TRL"]``): the sampled reward of every
    step, the greedy held-out accuracy [(step, acc)], the wall time of every step, and a summary."""
    from .rl.config import RunConfig
    with open(path) as f:
        data = json.load(f)
    if not TRL_RUN_KEYS <= set(data) or set(data["runs"]) != {"course", "TRL"}:
        raise ValueError(f"{path} is not a record of benchmarks/trl_toy.py (needs {sorted(TRL_RUN_KEYS)})")
    data["toy_config"] = RunConfig(**data["config"])
    return data


TRL_RUN_PHASES = ("sample", "pi_old + pi_ref", "score", "loss forward", "backward + optimiser", "other")


def trl_run_table(record) -> str:
    """Both trainers side by side, over every timed step of every repeat: the step time's median and 10th
    percentile, tokens/s end to end, greedy accuracy before and after; then the median of each phase of a
    step ("-": the trainer has no such phase)."""
    from .display import table
    runs = {name: record["runs"][name]["summary"] for name in ("course", "TRL")}
    rows = [[name, s["timed_steps"], 1e3 * s["median_step_s"], 1e3 * s["p10_step_s"], s["tokens_per_s"],
             f"{s['start_heldout']:.3f} -> {s['final_heldout']:.3f}"] for name, s in runs.items()]
    head = table(rows, ["trainer", "timed steps", "ms / step: median", "10th percentile", "tokens/s",
                        "greedy held-out"], ["s", "d", ".1f", ".1f", ",.0f", "s"])
    phases = [[p] + [f"{1e3 * s['median_phase_s'][p]:.1f}" if p in s["median_phase_s"] else "-"
                     for s in runs.values()] for p in TRL_RUN_PHASES]
    return head + "\n\n" + table(phases, ["phase (median ms)", "course", "TRL"], ["s", "s", "s"])
