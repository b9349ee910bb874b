"""course_lib.frameworks: the knob table against what the peers tests read from the installed frameworks
(notebooks/data/framework_defaults.json), each framework's normaliser against
hand-computed weights, the RunConfig -> verl / TRL translations, the stored peer-test reader."""
from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from course_lib import frameworks as fw
from course_lib.rl.config import make_config
from course_lib.toy.experiments import COMPARISONS

ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = ROOT / "notebooks/data/framework_defaults.json"


@pytest.fixture(scope="module")
def installed() -> dict:
    """What tests/peers/test_knobs.py read from the installed frameworks (`make peers` stores it)."""
    return json.loads(DEFAULTS.read_text())


def test_every_stated_default_is_the_one_read_from_the_installed_frameworks(installed):
    # the record is written by the frameworks themselves; editing KNOBS without `make peers` fails here
    assert installed["versions"] == fw.VERSIONS
    n = 0
    for knob in fw.KNOBS:
        for framework, settings in knob.settings().items():
            for s in settings:
                key = f"{framework} {s.name}"
                assert key in installed["defaults"], f"{key}: not read from the installed package"
                if s.default is not None:
                    stated = fw.stated_default(s)
                    stated = list(stated) if isinstance(stated, tuple) else stated
                    assert installed["defaults"][key] == stated, f"{key}: {s.default}"
                    n += 1
    assert n >= 45                                   # the table states defaults, not just names
    logged = set(installed["metrics"])
    for m in fw.METRICS:
        for framework, names in m.settings().items():
            assert {f"{framework} {name}" for name in names} <= logged, m.concept


def test_every_selectable_name_read_from_the_frameworks_is_in_the_table_with_a_course_function(installed):
    # the names each framework selects (loss modes, estimators, aggregation modes, loss types), as
    # tests/peers/test_knobs.py read them from the installed code; KNOBS lists each one
    stated = {}
    for k in fw.KNOBS:
        for framework, ss in k.settings().items():
            for s in ss:
                stated.setdefault(f"{framework} {s.name}", set()).update(fw.listed(s.values))
    for key, names in installed["choices"].items():
        assert sorted(stated[key]) == names, key
    assert len(installed["choices"]["verl algorithm.adv_estimator"]) == 14
    import course_lib
    for table, names in (("verl loss_mode", "verl actor.policy_loss.loss_mode"),
                         ("verl adv_estimator", "verl algorithm.adv_estimator"),
                         ("verl loss_agg_mode", "verl actor.loss_agg_mode"), ("TRL loss_type", "TRL loss_type")):
        assert sorted(fw.COURSE_FUNCTIONS[table]) == installed["choices"][names], table
        for path in fw.COURSE_FUNCTIONS[table].values():
            for one in path.split(" / "):
                module, name = one.split(" ")[0].split("(")[0].split(".")
                assert callable(getattr(getattr(course_lib, module), name)), one


def test_the_default_check_rejects_a_wrong_default(installed):
    # planted: verl's dual-clip constant is 3.0, TRL's IS cap 3.0; a swapped or changed one fails
    assert installed["defaults"]["verl actor.clip_ratio_c"] == fw.stated_default(
        fw.Setting("actor.clip_ratio_c", "3.0"))
    assert installed["defaults"]["verl actor.clip_ratio_c"] != fw.stated_default(
        fw.Setting("actor.clip_ratio_c", "2.5"))
    assert installed["defaults"]["TRL vllm_importance_sampling_mode"] != "token_truncate"
    with pytest.raises(ValueError, match="literal"):
        fw.stated_default(fw.Setting("x", "padded response length"))
    with pytest.raises(ValueError, match="no default"):
        fw.stated_default(fw.Setting("x"))


def test_knob_table_covers_the_course_concepts_and_renders_one_row_each():
    concepts = " ".join(k.concept for k in fw.KNOBS).lower()
    for word in ("group size", "std", "aggregation", "eps_low", "eps_high", "dual clip", "gspo",
                 "cispo", "sapo", "kl in the loss", "kl in the reward", "adaptive kl",
                 "dynamic sampling", "overlong", "tis / mis"):
        assert word in concepts, word
    md = fw.knob_table_markdown()
    assert len(md.splitlines()) == len(fw.KNOBS) + 2
    assert all(line.count("|") == 6 for line in md.splitlines())
    notes = fw.notes_markdown()
    for fact in ("clip_ratio_low = 10", "seq-mean-token-mean", "caps the log",
                 "masked_whiten", "1/B", "on by default in verl only", "denominator"):
        assert fact in notes, fact


def test_knob_and_metric_tables_let_long_names_wrap_and_copy_whole():
    # the tables must fit chapter 09's column at 1366 px (checked in chromium: 914 of 934 px with the
    # file browser open); a setting name breaks only at a <wbr> after '.' or '_', hyphenated values at '-'
    for md in (fw.knob_table_markdown(), fw.metrics_table_markdown()):
        codes = re.findall(r"<code>(.*?)</code>", md)
        assert codes and "`" not in md
        pieces = [part for c in codes for part in c.split("<wbr>") for part in part.split("-")]
        assert max(map(len, pieces)) <= 20, max(pieces, key=len)
    whole = re.sub("<wbr>", "", fw.knob_table_markdown())
    assert "<code>actor_rollout_ref.rollout.calculate_log_probs</code>" in whole


# ---- normalisers ------------------------------------------------------------------------------
LENGTHS = [1, 3, 2, 6]


def _mask(lengths=LENGTHS, T=6):
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]          # [B, T]


def _norm(framework, setting):
    return next(n for n in fw.NORMALISERS if n.framework == framework and n.setting == setting)


def _row_weights(w, mask):
    return [float(w[i][mask[i]][0]) for i in range(len(mask))]


def test_normaliser_weights_match_hand_computed_values():
    mask = _mask()
    B, n_tok = 4, sum(LENGTHS)                                                 # 12 tokens
    cases = {("TRL", "dapo"): [1 / n_tok] * 4,
             ("verl", "token-mean"): [1 / n_tok] * 4,
             ("OpenRLHF", "token-mean"): [1 / n_tok] * 4,
             # micro-batches {0, 1}: 4 tokens, {2, 3}: 8 tokens; each loss / 2 (accumulation)
             ("TRL", "bnpo"): [1 / 8, 1 / 8, 1 / 16, 1 / 16],
             ("TRL", "grpo"): [1 / (B * n) for n in LENGTHS],
             ("TRL", "dr_grpo"): [1 / (B * 10)] * 4}
    for key, expected in cases.items():
        w = fw.normaliser_weights(_norm(*key), mask, micro_batches=2, max_len=10)
        assert _row_weights(w, mask) == pytest.approx(expected, abs=1e-15), key
        assert float(w[~mask].abs().sum()) == 0.0


def test_global_normalisers_ignore_micro_batches_and_dr_grpo_falls_back_to_the_padded_length():
    mask = _mask()
    for n in fw.NORMALISERS:
        if n.scope == "global":
            torch.testing.assert_close(fw.normaliser_weights(n, mask, micro_batches=1),
                                       fw.normaliser_weights(n, mask, micro_batches=4))
    w = fw.normaliser_weights(_norm("TRL", "dr_grpo"), mask)
    assert _row_weights(w, mask) == pytest.approx([1 / (4 * 6)] * 4)


def test_normaliser_weights_reject_bad_input():
    with pytest.raises(ValueError, match="micro_batches"):
        fw.normaliser_weights(fw.NORMALISERS[0], _mask(), micro_batches=3)
    with pytest.raises(ValueError, match="mask"):
        fw.normaliser_weights(fw.NORMALISERS[0], torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="scope"):
        fw.normaliser_weights(fw.Normaliser("x", "y", "token-mean", "local"), _mask())


# ---- translations ------------------------------------------------------------------------------
BASE = make_config("smoke")


def verl(cfg):
    return {k: v for k, v, _ in fw.to_verl(cfg) if not k.startswith("#")}


def trl(cfg):
    return {k: v for k, v, _ in fw.to_trl(cfg) if not k.startswith("#")}


def openrlhf(cfg):
    return {k: v for k, v, _ in fw.to_openrlhf(cfg) if not k.startswith("#")}


A = "actor_rollout_ref.actor."


def test_cispo_cap_is_a_distance_in_verl_and_an_absolute_cap_in_trl():
    cfg = replace(BASE, loss="cispo")                                          # eps_high 0.28, no low
    v, t = verl(cfg), trl(cfg)
    assert v[A + "policy_loss.loss_mode"] == "cispo"
    assert v[A + "clip_ratio_high"] == 0.28 and v[A + "clip_ratio_low"] == 10.0
    assert t["loss_type"] == "cispo" and t["epsilon_high"] == pytest.approx(1.28)
    assert "epsilon" not in t
    t5 = trl(replace(cfg, eps_high=4.0))
    assert t5["epsilon_high"] == pytest.approx(5.0)                            # TRL's recommended 5


def test_dr_grpo_translates_to_no_std_and_the_constant_normaliser():
    cfg = replace(BASE, loss="dr_grpo", max_new_tokens=7)
    v, t = verl(cfg), trl(cfg)
    assert v["algorithm.norm_adv_by_std_in_grpo"] is False
    assert v[A + "loss_agg_mode"] == "seq-mean-token-sum-norm" and v[A + "loss_scale_factor"] == 7
    assert t["loss_type"] == "dr_grpo" and t["scale_rewards"] == "none"
    assert t["max_completion_length"] == 7
    assert trl(replace(cfg, std_scaling=True))["scale_rewards"] == "group"


def test_dual_clip_off_in_the_toy_is_turned_off_in_verl_and_on_maps_to_trl_delta():
    v, t = verl(BASE), trl(BASE)                                               # grpo, no dual clip
    assert v[A + "clip_ratio_c"] > 1e6 and "delta" not in t
    cfg = replace(BASE, loss="ppo", dual_clip=3.0)
    assert verl(cfg)[A + "clip_ratio_c"] == 3.0 and trl(cfg)["delta"] == 3.0


def test_gspo_follows_the_aggregation_and_sapo_forces_its_own():
    v, t = verl(replace(BASE, loss="gspo")), trl(replace(BASE, loss="gspo"))
    assert v[A + "policy_loss.loss_mode"] == "gspo" and v[A + "clip_ratio_low"] == 3e-4
    assert v[A + "loss_agg_mode"] == "seq-mean-token-mean"                  # the toy's GSPO default
    assert verl(replace(BASE, loss="gspo", agg="token-mean"))[A + "loss_agg_mode"] == "token-mean"
    assert t["importance_sampling_level"] == "sequence" and t["loss_type"] == "grpo"
    assert (t["epsilon"], t["epsilon_high"]) == (3e-4, 4e-4)
    rows = fw.to_verl(replace(BASE, loss="sapo", agg="token-mean"))
    agg = next(r for r in rows if r[0] == A + "loss_agg_mode")
    assert agg[1] == "seq-mean-token-mean" and "token-mean" in agg[2]
    t = trl(replace(BASE, loss="sapo", tau_neg=2.0))
    assert (t["loss_type"], t["sapo_temperature_pos"], t["sapo_temperature_neg"]) == ("sapo", 1.0, 2.0)


def test_aggregation_comparison_maps_to_trl_loss_types_and_verl_modes():
    cfgs = COMPARISONS["aggregation"].configs(BASE, seed=0)
    got = {label: (verl(c)[A + "loss_agg_mode"], trl(c)["loss_type"]) for label, c in cfgs.items()}
    assert got == {"seq-mean-token-mean": ("seq-mean-token-mean", "grpo"),
                   "token-mean": ("token-mean", "dapo")}


def test_corrections_translate_to_mode_level_and_cap():
    tis = replace(BASE, correction="tis", correction_level="token", correction_cap=2.0)
    mis = replace(BASE, correction="mis", correction_level="sequence", correction_cap=3.0)
    assert trl(tis)["vllm_importance_sampling_mode"] == "token_truncate"
    assert trl(mis)["vllm_importance_sampling_mode"] == "sequence_mask"
    assert trl(mis)["vllm_importance_sampling_clip_max"] == 3.0
    assert trl(BASE)["vllm_importance_sampling_correction"] is False          # TRL's default is on
    v = verl(mis)
    assert v["algorithm.rollout_correction.rollout_is"] == "sequence"
    # MIS is verl's IcePop form: "lower_upper" with no effective lower bound; no rejection (rollout_rs)
    assert v["algorithm.rollout_correction.rollout_is_threshold"] == "1e-09_3"
    assert "algorithm.rollout_correction.rollout_rs" not in v
    assert "rollout_is_threshold='1e-09_3'" in fw.verl_text(mis)              # quoted: not a number
    assert v["actor_rollout_ref.rollout.calculate_log_probs"] is True
    assert verl(tis)["algorithm.rollout_correction.rollout_is_threshold"] == 2.0
    assert "algorithm.rollout_correction.rollout_is" not in verl(BASE)
    o = openrlhf(replace(mis, correction_level="token"))
    assert (o["--algo.advantage.is_correction_level"], o["--algo.advantage.is_correction_mode"],
            o["--algo.advantage.is_correction_threshold"]) == ("token", "mask", [0.0, 3.0])
    assert "--algo.advantage.is_correction_level" not in openrlhf(mis)       # geometric mean there
    assert any("geometric mean" in n for k, _, n in fw.to_openrlhf(mis) if k.startswith("#"))


def test_overlong_penalty_uses_verls_dapo_reward_manager_and_openrlhfs_buffer():
    cfg = replace(BASE, overlong_penalty=True, overlong_cache=3)
    v, o = verl(cfg), openrlhf(cfg)
    assert v["reward.reward_manager.name"] == "dapo"
    assert v["+reward.reward_kwargs.overlong_buffer_cfg.len"] == 3
    assert v["+reward.reward_kwargs.max_resp_len"] == cfg.max_new_tokens
    assert not any(k.startswith("reward_model.") for k in v)                 # the removed keys
    assert (o["--reward.overlong_buffer_len"], o["--reward.overlong_penalty_factor"]) == (3, 1.0)


def test_sizes_and_optimiser_settings_carry_over():
    cfg = replace(BASE, prompts_per_step=32, group_size=16, minibatches=4, epochs=2, lr=3e-4,
                  temperature=0.7, kl_coef=0.01, kl_estimator="k2")
    v, t = verl(cfg), trl(cfg)
    assert (v["data.train_batch_size"], v["actor_rollout_ref.rollout.n"]) == (32, 16)
    assert (v[A + "ppo_mini_batch_size"], v[A + "ppo_epochs"], v[A + "optim.lr"]) == (8, 2, 3e-4)
    assert (v[A + "use_kl_loss"], v[A + "kl_loss_coef"], v[A + "kl_loss_type"]) == (True, 0.01, "mse")
    assert (t["num_generations"], t["generation_batch_size"], t["per_device_train_batch_size"]) == (16, 512, 128)
    assert t["gradient_accumulation_steps"] == 1 and "steps_per_generation" not in t   # TRL derives it: 4
    assert (t["num_iterations"], t["learning_rate"], t["temperature"], t["beta"]) == (2, 3e-4, 0.7, 0.01)
    assert t["use_bias_correction_kl"] is False          # TRL's default multiplies k3 by the ratio
    notes = " ".join(n for k, _, n in fw.to_trl(cfg) if k.startswith("#"))
    assert "only k3" in notes
    o = openrlhf(cfg)
    assert (o["--rollout.batch_size"], o["--rollout.n_samples_per_prompt"], o["--train.batch_size"]) == (32, 16, 128)
    assert (o["--train.max_epochs"], o["--algo.kl.use_loss"], o["--algo.kl.estimator"]) == (2, True, "k2")
    assert openrlhf(BASE)["--algo.kl.init_coef"] == 0.0                     # its default 0.01 is on
    with pytest.raises(ValueError, match="cfg.loss"):
        fw.to_verl(replace(BASE, loss=lambda *a, **k: None))


def test_every_translation_gives_pasteable_text():
    # what each framework makes of the text is tested in tests/peers/test_translations.py
    for cfg in fw.translation_cases().values():
        text = fw.trl_text(cfg)
        call = ast.parse(text, mode="eval").body
        assert isinstance(call, ast.Call) and call.func.id == "GRPOConfig"
        assert {kw.arg for kw in call.keywords} == set(trl(cfg))
        for t in (text, fw.verl_text(cfg), fw.openrlhf_text(cfg)):      # JupyterLab's column: no wrap
            assert max(len(line) for line in t.splitlines()) <= fw.WIDTH, t
        lines = fw.verl_text(cfg).split("\n# notes:")[0].split(" \\\n")
        assert all(re.fullmatch(r"\+?[a-z_.]+=\S+", line) for line in lines), lines
        assert len(lines) == len(verl(cfg))
        args = fw.openrlhf_args(cfg)
        assert [a for a in args if a.startswith("--")] == list(openrlhf(cfg))


# ---- the stored peer test ------------------------------------------------------------------------
def test_stored_agreement_has_no_undocumented_difference():
    data = fw.load_agreement(ROOT / "notebooks/data/verl_agreement.json")
    assert len(data["checks"]) >= 20 and fw.GSPO_TOKEN_CHECK in data["checks"]
    assert fw.agreement_failures(data["checks"]) == []
    assert data["checks"][fw.GSPO_TOKEN_CHECK]["grad"] > 1e-3              # the documented one


def test_agreement_failures_catch_an_undocumented_or_a_wrong_field():
    checks = {"KL: k3": {"value": 2e-8, "grad": 0.0},
              fw.GSPO_TOKEN_CHECK: {"value": 1e-3, "grad": 0.5},
              "ok": {"value": 1e-9, "grad": None}}
    bad = fw.agreement_failures(checks)
    assert len(bad) == 2 and bad[0].startswith("KL: k3 [value]") and "[value]" in bad[1]
    with pytest.raises(ValueError, match="peer-test"):
        fw.load_agreement(ROOT / "notebooks/data/toy_aggregation.json")


def test_comparison_text_lists_only_what_differs_between_variants():
    text = fw.comparison_text(COMPARISONS["aggregation"], BASE, "verl")
    lines = text.splitlines()
    assert lines[1:] == ["  seq-mean-token-mean:", f"    {A}loss_agg_mode=seq-mean-token-mean",
                         "  token-mean:", f"    {A}loss_agg_mode=token-mean"]
    first = next(iter(COMPARISONS["aggregation"].configs(BASE, seed=BASE.seed).values()))
    n_shared = len(fw.to_verl(first)) - 1                    # every row of a variant but its aggregation
    assert lines[0].startswith(f"[verl] {n_shared} settings shared")
    text = fw.comparison_text(COMPARISONS["aggregation"], BASE, "TRL")
    assert "loss_type='grpo'  # seq-mean-token-mean" in text and "loss_type='dapo'" in text
    stale = fw.comparison_text(COMPARISONS["stale_sampler"], BASE, "TRL")
    assert "vllm_importance_sampling_mode='token_mask'" in stale
    with pytest.raises(ValueError, match="framework"):
        fw.comparison_text(COMPARISONS["aggregation"], BASE, "OpenRLHF")


def test_variants_text_writes_any_configs_as_diffs_of_what_they_share():
    from course_lib.rl.config import make_config
    real = make_config("real", minibatches=2)
    text = fw.variants_text({"grpo": real, "gspo": replace(real, loss="gspo")}, "TRL")
    grpo, gspo = text.split("  gspo:")
    assert "importance_sampling_level='sequence'" in gspo and "importance_sampling" not in grpo
    assert "epsilon=0.0003" in gspo and "epsilon=0.2" in grpo


def test_a_comment_too_long_for_the_line_goes_above_its_setting():
    assert fw._commented("    ", "a=1,", "short") == ["    a=1,  # short"]
    lines = fw._commented("    ", "a=1,", "word " * 30, width=40)
    assert lines[-1] == "    a=1," and all(len(line) <= 40 and line.lstrip().startswith("#") for line in lines[:-1])
    assert " ".join(line.lstrip("# ") for line in lines[:-1]) == " ".join(["word"] * 30)
    for name, comp in COMPARISONS.items():
        for framework in ("verl", "TRL"):
            text = fw.comparison_text(comp, BASE, framework)
            assert max(len(line) for line in text.splitlines()) <= fw.WIDTH, (name, framework)


def test_the_frameworks_losses_and_the_other_estimators_translate_to_their_own_names():
    v = {loss: verl(replace(BASE, loss=loss)) for loss in ("gpg", "gmpo", "luspo", "dppo_tv", "kl_cov", "vespo")}
    assert v["gpg"][A + "policy_loss.loss_mode"] == "gpg" and A + "clip_ratio_low" not in v["gpg"]
    assert v["gmpo"][A + "policy_loss.loss_mode"] == "geo_mean"
    assert (v["luspo"][A + "policy_loss.loss_mode"], v["luspo"][A + "loss_agg_mode"]) == ("gspo", "seq-mean-token-sum")
    assert (v["dppo_tv"][A + "clip_ratio_high"], v["dppo_tv"][A + "clip_ratio_c"]) == (0.2, 3.0)   # delta, trunc
    assert v["kl_cov"][A + "policy_loss.ppo_kl_coef"] == 0.1
    assert A + "policy_loss.loss_mode" not in v["vespo"]                      # verl has none: a note
    modes = {rows[A + "policy_loss.loss_mode"] for loss, rows in v.items() if loss != "vespo"}
    assert modes <= set(fw.listed(fw.VERL_LOSS_MODES))
    assert any(k == "# policy loss" for k, _, _ in fw.to_verl(replace(BASE, loss="vespo")))
    t = {loss: trl(replace(BASE, loss=loss)) for loss in ("luspo", "vespo", "dro")}
    assert (t["luspo"]["loss_type"], t["luspo"]["importance_sampling_level"]) == ("luspo", "sequence")
    assert (t["vespo"]["loss_type"], t["vespo"]["vespo_k_neg"]) == ("vespo", 3.0)
    assert t["dro"]["loss_type"] == "dapo" and "epsilon" not in t["dro"]    # its aggregation; TRL has no DRO
    est = {e: verl(replace(BASE, adv_estimator=e))["algorithm.adv_estimator"] for e in
           ("reinforce_pp", "reinforce_pp_baseline", "remax", "opo", "passk", "gpg")}
    assert est == {"reinforce_pp": "reinforce_plus_plus", "reinforce_pp_baseline": "reinforce_plus_plus_baseline",
                   "remax": "remax", "opo": "opo", "passk": "grpo_passk", "gpg": "gpg"}
    assert set(est.values()) <= set(fw.listed(fw.VERL_ESTIMATORS))
    assert openrlhf(replace(BASE, adv_estimator="reinforce_pp"))["--algo.advantage.estimator"] == "reinforce"
    assert "--algo.advantage.estimator" not in openrlhf(replace(BASE, adv_estimator="opo"))
    assert any(k == "# advantage" for k, _, _ in fw.to_trl(replace(BASE, adv_estimator="opo")))


def test_a_sampler_in_another_precision_is_named_in_every_translation():
    cfg = make_config("smoke", sampler_precision="bf16")
    for translate in (fw.to_verl, fw.to_trl, fw.to_openrlhf):
        notes = [note for key, _, note in translate(cfg) if key == "# sampler precision"]
        assert notes and "bf16" in notes[0] and "fp32" in notes[0], translate.__name__
        assert not [k for k, _, _ in translate(make_config("smoke")) if k == "# sampler precision"]


def test_a_lora_run_carries_its_adapters_into_each_framework():
    from course_lib.rl.config import make_config
    cfg = make_config("real", policy="smollm2_lora", lora_rank=4, lora_targets=("q_proj", "v_proj"))
    verl = {k: v for k, v, _ in fw.to_verl(cfg)}
    assert (verl["actor_rollout_ref.model.lora_rank"], verl["actor_rollout_ref.model.lora_alpha"],
            verl["actor_rollout_ref.model.target_modules"]) == (4, 32.0, ["q_proj", "v_proj"])
    ohf = {k: v for k, v, _ in fw.to_openrlhf(cfg)}
    assert (ohf["--ds.lora.rank"], ohf["--ds.lora.alpha"], ohf["--ds.lora.target_modules"]) == (4, 32,
                                                                                            ["q_proj", "v_proj"])
    assert isinstance(ohf["--ds.lora.alpha"], int)                            # OpenRLHF's parser takes an int
    half = {k: (v, n) for k, v, n in fw.to_openrlhf(replace(cfg, lora_alpha=12.5))}["--ds.lora.alpha"]
    assert half[0] == 12.5 and "integer" in half[1]
    trl = {k: n for k, _, n in fw.to_trl(cfg)}
    assert "peft_config=LoraConfig(r=4, lora_alpha=32, target_modules=['q_proj', 'v_proj']" in trl["# peft_config"]
    for rows in (fw.to_verl(cfg), fw.to_trl(cfg), fw.to_openrlhf(cfg)):
        note = dict((k, n) for k, _, n in rows).get("# not translated", "")
        assert "lora_" not in note
    assert not any("lora" in k for k, _, _ in fw.to_verl(make_config("real")))     # full fine-tuning: none
