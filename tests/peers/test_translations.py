"""Every translation of course_lib.frameworks, handed to the framework it is written for.

For each configuration the course translates (frameworks.translation_cases: the sizes, every loss, every
chapter-07 variant, each correction, dynamic sampling, the overlong penalty, the KL estimators, dual
clip, several optimiser steps per batch):
- TRL 1.16.0: the pasteable `GRPOConfig(...)` text constructs, every field reads back, and TRL's own
  batch arithmetic gives the toy's optimiser steps per batch;
- verl 0.9.1: the pasteable Hydra overrides compose onto verl's `ppo_trainer` config in struct mode,
  pass `validate_config`, convert to verl's dataclasses, and read back;
- OpenRLHF 0.11.2: the flags parse in its own parser, pass the checks its script runs before training,
  and read back.
"""
from __future__ import annotations

import functools
import math

import pytest

from conftest import OPENRLHF_MACHINE, REASON, TRL_MACHINE, VERL_MACHINE

pytest.importorskip("trl", reason=REASON)
pytest.importorskip("verl", reason=REASON)
pytest.importorskip("openrlhf", reason=REASON)
from omegaconf import OmegaConf                                    # noqa: E402
from trl import GRPOConfig                                         # noqa: E402
from verl.utils.config import omega_conf_to_dataclass, validate_config   # noqa: E402

from course_lib import frameworks as fw                            # noqa: E402

CASES = fw.translation_cases()


def settings(rows):
    return {k: v for k, v, _ in rows if not k.startswith("#")}


def same(a, b) -> bool:
    """Equal as values: lists and tuples alike, numbers to 1e-12, a bool only equals a bool."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12)
    return a == b


# ---- TRL ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("label", CASES)
def test_trl_text_constructs_reads_back_and_keeps_the_toys_batch_arithmetic(label):
    cfg = CASES[label]
    conf = eval(fw.trl_text(cfg), {"GRPOConfig": functools.partial(GRPOConfig, **TRL_MACHINE)})
    for key, value in settings(fw.to_trl(cfg)).items():
        assert same(getattr(conf, key), value), f"{key}: TRL holds {getattr(conf, key)!r}, course {value!r}"
    # TRL regenerates every steps_per_generation x num_iterations micro-steps of
    # per_device_train_batch_size completions per process; every gradient_accumulation_steps of them make
    # an optimiser step. Here on one process: the toy's world_size ranks' micro-batches run one after another
    assert conf.generation_batch_size == cfg.batch_size
    assert conf.generation_batch_size // conf.num_generations == cfg.prompts_per_step
    assert conf.gradient_accumulation_steps == cfg.micro_batches
    assert conf.steps_per_generation == cfg.minibatches * cfg.micro_batches * cfg.world_size
    if cfg.world_size == 1:
        assert conf.steps_per_generation * conf.num_iterations // conf.gradient_accumulation_steps \
            == cfg.minibatches * cfg.epochs


def test_trl_derives_steps_per_generation_without_the_accumulation_factor():
    # TRL 1.16.0: steps_per_generation = generation_batch_size / (per_device_train_batch_size x processes),
    # micro-steps; with 2 accumulation steps a generation batch of 8 micro-steps makes 4 optimiser steps
    conf = GRPOConfig(generation_batch_size=64, per_device_train_batch_size=8, gradient_accumulation_steps=2,
                      **TRL_MACHINE)
    assert conf.steps_per_generation == 8
    note = next(k.note for k in fw.KNOBS if k.concept == "Epochs and optimiser steps per rollout batch")
    derived = note.split("derives")[1].split(", so")[0]              # the formula the table states
    assert "per_device_train_batch_size" in derived and "gradient_accumulation_steps" not in derived


def test_trl_rejects_what_the_course_no_longer_writes():
    # both batch settings at once, the form the course's table had: TRL refuses it
    with pytest.raises(ValueError, match="can not be both configured"):
        GRPOConfig(generation_batch_size=512, steps_per_generation=1, **TRL_MACHINE)
    # and without per_device_train_batch_size, its default 8 makes 64 optimiser steps of a 512 batch
    conf = GRPOConfig(generation_batch_size=512, **TRL_MACHINE)
    assert conf.steps_per_generation == 64


# ---- verl ---------------------------------------------------------------------------------------
def overrides(cfg) -> list[str]:
    return fw.verl_text(cfg).split("\n# notes:")[0].split(" \\\n")


def machine(cfg) -> list[str]:
    """VERL_MACHINE without the keys the translation sets itself (ranks, micro-batch size)."""
    own = {line.split("=")[0] for line in overrides(cfg)}
    return [m for m in VERL_MACHINE if m.split("=")[0] not in own]


@pytest.mark.parametrize("label", CASES)
def test_verl_overrides_compose_validate_and_read_back(label, verl_compose):
    cfg = CASES[label]
    composed = verl_compose(overrides(cfg) + machine(cfg))
    assert OmegaConf.is_struct(composed)
    validate_config(composed, use_reference_policy=cfg.kl_coef > 0, use_critic=False)
    omega_conf_to_dataclass(composed.algorithm)                    # verl's AlgoConfig accepts it
    for key, value in settings(fw.to_verl(cfg)).items():
        got = OmegaConf.select(composed, key.lstrip("+"), throw_on_missing=True)
        assert same(got, value), f"{key}: verl holds {got!r}, course {value!r}"


def test_verls_struct_mode_rejects_an_unknown_key_such_as_the_old_overlong_setting(verl_compose):
    from hydra.errors import ConfigCompositionException
    for key in ("reward_model.overlong_buffer.enable", "actor_rollout_ref.actor.clip_ratio_lower"):
        with pytest.raises(ConfigCompositionException, match="not in struct|Could not override"):
            verl_compose([f"{key}=True"])


# ---- OpenRLHF -----------------------------------------------------------------------------------
def dotted(args, flag: str):
    value = args
    for part in flag.removeprefix("--").split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("label", CASES)
def test_openrlhf_flags_parse_pass_its_checks_and_read_back(label, openrlhf_cli):
    cfg = CASES[label]
    _, validate = openrlhf_cli
    args = validate(fw.openrlhf_args(cfg) + OPENRLHF_MACHINE)
    if cfg.micro_batches > 1 or cfg.world_size > 1:       # OpenRLHF's own arithmetic: micro-steps per step
        assert args.train.batch_size % (args.train.micro_batch_size * args.actor.num_gpus_per_node) == 0
    for flag, value in settings(fw.to_openrlhf(cfg)).items():
        got = dotted(args, flag)
        assert same(got, value), f"{flag}: OpenRLHF holds {got!r}, course {value!r}"


def test_openrlhfs_parser_rejects_an_unknown_or_renamed_flag(openrlhf_cli):
    parser, _ = openrlhf_cli
    for old in ("--algo.advantage.is_correction_enable", "--algo.advantage.is_correction_type"):
        with pytest.raises(SystemExit):
            parser.parse_args([old, "tis"])
