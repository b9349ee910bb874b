"""Every knob of the toy reaches each translation (course_lib.frameworks.to_verl / to_trl / to_openrlhf).

For every field of RunConfig, a config that differs from a reference in that field alone (in a context where
the field takes effect: overlong_cache with the overlong penalty on, kl_estimator with a KL term, ...) must
give each framework's translation another text: a setting, a note that the framework has none, or the
"# not translated" note naming the field. A knob the translation drops silently fails here (planted: drop
entropy_coef from to_verl, or std_scope from to_trl, and the test names it).
"""
from __future__ import annotations

from dataclasses import fields, replace

import pytest

from course_lib import frameworks as fw
from course_lib.rl.config import RunConfig, make_config

# field -> (a non-default value, the other fields it needs to take effect)
CHANGES = {
    "task": ("scratchpad", {"max_new_tokens": 48}),
    "seed": (1, {}),
    "steps": (100, {}),
    "device": ("cpu", {}),
    "num_threads": (2, {}),
    "precision": ("bf16", {}),
    "sampler_precision": ("bf16", {}),
    "eval_every": (10, {}),
    "heldout_questions": (100, {}),
    "heldout_pairs": (12, {"policy": "smollm2", "task": "chat_addition"}),
    "lora_rank": (4, {"policy": "smollm2_lora", "task": "chat_addition"}),
    "lora_alpha": (16.0, {"policy": "smollm2_lora", "task": "chat_addition"}),
    "lora_targets": (("q_proj", "v_proj"), {"policy": "smollm2_lora", "task": "chat_addition"}),
    "n_layer": (3, {}),
    "d_model": (128, {}),
    "n_head": (8, {}),
    "max_new_tokens": (8, {}),
    "warm_steps": (100, {}),
    "warm_target": (0.5, {}),
    "warm_batch": (128, {}),
    "warm_lr": (1e-3, {}),
    "warm_noise": (0.1, {}),
    "warm_seed": (1, {}),
    "prompts_per_step": (32, {}),
    "group_size": (4, {}),
    "temperature": (0.7, {}),
    "lr": (3e-4, {}),
    "lr_schedule": ("cosine", {}),
    "lr_min": (1e-5, {"lr_schedule": "cosine"}),
    "warmup_steps": (0, {}),
    "grad_clip": (0.5, {}),
    "minibatches": (2, {}),
    "micro_batches": (2, {}),
    "world_size": (2, {}),
    "epochs": (2, {}),
    "loss": ("dapo", {}),
    "agg": ("token-mean", {}),
    "eps_low": (0.1, {}),
    "eps_high": (0.3, {}),
    "dual_clip": (3.0, {"loss": "ppo"}),
    "tau_pos": (0.9, {"loss": "sapo"}),
    "tau_neg": (1.2, {"loss": "sapo"}),
    "entropy_coef": (0.01, {}),
    "adv_estimator": ("rloo", {}),
    "std_scaling": (False, {}),
    "std_scope": ("batch", {}),
    "kl_coef": (0.01, {}),
    "kl_estimator": ("k1", {"kl_coef": 0.01}),
    "dynamic_sampling": (True, {}),
    "max_sampling_rounds": (2, {"dynamic_sampling": True}),
    "overlong_penalty": (True, {}),
    "overlong_cache": (3, {"overlong_penalty": True}),
    "mask_truncated": (True, {}),
    "verifier": ("contains", {}),
    "length_bonus": (0.1, {}),
    "format_weight": (0.5, {"task": "scratchpad", "max_new_tokens": 48}),
    "mismatch": ("noise", {}),
    "logits_noise": (1.0, {"mismatch": "noise"}),
    "stale_steps": (2, {"mismatch": "stale"}),
    "old_logp_source": ("sampler", {}),
    "correction": ("tis", {}),
    "correction_level": ("sequence", {"correction": "tis"}),
    "correction_cap": (3.0, {"correction": "tis"}),
    "monitor_kl_ref": (True, {}),
    "old_logp_forward": ("separate", {}),
    "changes": ({100: {"lr": 1e-4}}, {}),
}
TEXTS = {"verl": fw.verl_text, "TRL": fw.trl_text, "OpenRLHF": fw.openrlhf_text}


def pair(name: str) -> tuple[RunConfig, RunConfig]:
    """(reference, the reference with ``name`` changed), both valid, differing in ``name`` alone."""
    value, context = CHANGES[name]
    base = make_config("smoke", **context)
    return base, replace(base, **{name: value})


# the model itself: a framework takes it as a path, not as a setting, and it cannot change alone (a policy
# trains on its own task's token ids), so no one-field pair exists for it
MODEL_FIELDS = ("policy",)


def test_every_toyconfig_field_has_a_change_here():
    # a new knob without an entry fails: it must be translated or named as not translated
    assert sorted(CHANGES) == sorted(f.name for f in fields(RunConfig) if f.name not in MODEL_FIELDS)


@pytest.mark.parametrize("framework", sorted(TEXTS))
@pytest.mark.parametrize("name", sorted(CHANGES))
def test_changing_one_knob_changes_the_translation(name, framework):
    base, changed = pair(name)
    assert base.diff(changed).keys() == {name}
    text = TEXTS[framework]
    assert text(changed) != text(base), f"{framework}: {name}={CHANGES[name][0]!r} leaves the translation unchanged"


@pytest.mark.parametrize("framework", sorted(TEXTS))
def test_a_knob_the_framework_lacks_is_named_in_the_not_translated_note(framework):
    rows = {"verl": fw.to_verl, "TRL": fw.to_trl, "OpenRLHF": fw.to_openrlhf}[framework]
    cfg = make_config("smoke", d_model=128, seed=3)
    note = dict((k, n) for k, _, n in rows(cfg))["# not translated"]
    assert note == "seed=3, d_model=128"
    assert "# not translated" not in {k for k, _, _ in rows(make_config("smoke"))}


def test_the_chapter_11_knobs_reach_the_settings_the_frameworks_have():
    cfg = replace(make_config("long"), entropy_coef=0.01, std_scope="batch", format_weight=0.5,
                  mask_truncated=True, micro_batches=2)
    trl = {k: v for k, v, _ in fw.to_trl(cfg)}
    assert (trl["entropy_coef"], trl["scale_rewards"], trl["mask_truncated_completions"]) == (0.01, "batch", True)
    assert trl["reward_weights"] == [1.0, 0.5] and trl["gradient_accumulation_steps"] == 2
    verl = {k: v for k, v, _ in fw.to_verl(cfg)}
    assert verl["actor_rollout_ref.actor.entropy_coeff"] == 0.01
    assert verl["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == cfg.batch_size // 2
    assert {"# advantage std", "# truncated responses", "# reward"} <= set(verl)
    openrlhf = {k: v for k, v, _ in fw.to_openrlhf(cfg)}
    assert openrlhf["--actor.entropy_coef"] == 0.01 and openrlhf["--train.micro_batch_size"] == cfg.batch_size // 2


def test_trl_notes_its_token_count_when_a_batch_makes_several_token_mean_steps():
    notes = {k for k, _, _ in fw.to_trl(make_config("smoke", agg="token-mean", minibatches=4))}
    assert "# token count" in notes
    assert "# token count" not in {k for k, _, _ in fw.to_trl(make_config("smoke", agg="token-mean"))}
    assert "# token count" not in {k for k, _, _ in fw.to_trl(make_config("smoke", minibatches=4))}
