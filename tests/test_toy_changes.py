"""Changes of configuration during a run (``RunConfig.changes``): honoured at their step, exactly.

A run with ``changes={k: {knob: value}}`` must be the base run, row for row, before step k; from
step k on, every piece of the step (sampler, verifier, rewards, targets, update, learning rate) must
see ``cfg.at(k)``, the base config with the knobs replaced, which is an ordinary config the one-step
oracle (tests/test_toy_oracle.py) already covers. A stale sampler switched on mid-run must read the
learner's weights from ``stale_steps`` optimiser steps before, not the warm start's.
"""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from course_lib.rl import loss_step, trainer
from course_lib.rl.config import CHANGEABLE, RunConfig, make_config
from course_lib.toy.fingerprint import NONDETERMINISTIC
from course_lib.rl import train

TINY = RunConfig(steps=5, prompts_per_step=8, group_size=4, n_layer=1, d_model=32, n_head=2,
                 warm_steps=20, warm_target=None, warm_lr=1e-2, heldout_questions=64, eval_every=2,
                 lr=3e-3, warmup_steps=1, device="cpu", overlong_penalty=True, overlong_cache=4)


pytestmark = pytest.mark.usefixtures("one_thread")      # tests/conftest.py


def _values(row):
    return {k: v for k, v in row.items() if not k.startswith(NONDETERMINISTIC)}


def _same(a, b):
    return all((math.isnan(x) and math.isnan(b[k])) or x == b[k] for k, x in a.items()) and a.keys() == b.keys()


def test_the_config_in_force_at_each_step():
    cfg = replace(TINY, changes={4: {"lr": 0.01}, 2: {"temperature": 0.5, "verifier": "contains"}})
    assert cfg.onset == 2 and cfg.at(1) is cfg
    assert (cfg.at(2).temperature, cfg.at(2).lr, cfg.at(2).verifier) == (0.5, 3e-3, "contains")
    assert (cfg.at(5).temperature, cfg.at(5).lr) == (0.5, 0.01) and cfg.at(5).changes == ()
    assert cfg.at(5) == replace(TINY, temperature=0.5, verifier="contains", lr=0.01)
    assert RunConfig(**{**vars(cfg), "changes": [[2, [["temperature", 0.5], ["verifier", "contains"]]],
                                                 [4, [["lr", 0.01]]]]}) == cfg      # the JSON form


@pytest.mark.parametrize("changes, words", [
    ({0: {"lr": 1e-3}}, "an int in 1..steps"), ({9: {"lr": 1e-3}}, "an int in 1..steps"),
    ({2: {"seed": 1}}, "cannot change mid-run"), ({2: {"group_size": 4}}, "cannot change mid-run"),
    ({2: {}}, "no knob"), ({2: {"temperature": 0}}, "changes at step 2: temperature must be > 0"),
    ({2: {"max_new_tokens": 9}}, "may only shrink"), ({2: {"max_new_tokens": 3}}, "overlong_cache must be"), ([(2, {"lr": 1.0}), (2, {"lr": 2.0})], "at most once"),
])
def test_bad_changes_are_refused_naming_the_step_and_the_knob(changes, words):
    with pytest.raises(ValueError, match=words):
        replace(TINY, changes=changes)


def test_rows_before_the_onset_are_the_base_runs_and_the_change_takes_effect_at_it():
    base = train(TINY, progress=False).rows
    changed = train(replace(TINY, changes={3: {"lr": 0.02, "length_bonus": 0.1}}), progress=False).rows
    for b, c in zip(base[:3], changed[:3]):                      # steps 0, 1, 2: the same run
        assert _same(_values(b), _values(c)), b["step"]
    assert changed[3]["lr"] == pytest.approx(0.02) and base[3]["lr"] == pytest.approx(3e-3)
    assert changed[3]["reward/mean"] > base[3]["reward/mean"] + 0.1 * 1.0       # the bonus is paid from step 3


def test_every_piece_of_a_step_sees_the_config_in_force(monkeypatch):
    seen = {"collect": [], "targets": [], "update": [], "eval": []}
    for module, name in ((trainer, "collect"), (loss_step, "targets"), (trainer, "update")):
        real = getattr(module, name)

        def spy(cfg, *args, _real=real, _name=name, **kw):
            seen[_name].append(cfg)
            return _real(cfg, *args, **kw)
        monkeypatch.setattr(module, name, spy)
    real_eval = trainer.heldout_accuracy
    monkeypatch.setattr(trainer, "heldout_accuracy",
                        lambda m, p, n, *a: seen["eval"].append(n) or real_eval(m, p, n, *a))
    cfg = replace(TINY, changes={2: {"temperature": 0.7, "kl_coef": 0.3}, 4: {"max_new_tokens": 4}})
    h = train(cfg, progress=False)
    want = [cfg.at(s) for s in range(1, cfg.steps + 1)]
    assert seen["collect"] == seen["targets"] == seen["update"] == want
    assert seen["eval"] == [6, 6, 4, 4]                             # steps 0, 2, 4, 5: the budget in force
    assert h.rows[4]["len/truncated_frac"] >= h.rows[1]["len/truncated_frac"]
    assert max(len_ for len_ in h.series("len/all")[1][3:]) <= 4


def test_a_sampler_that_falls_behind_mid_run_reads_weights_stale_steps_old(monkeypatch):
    """Switched on at step 3 with stale_steps 1, then 3 from step 5 (one optimiser step per RL step),
    the sampler holds the learner's weights from that many steps before: kept from the start."""
    after_step, used = [], []                # learner weights after each RL step; sampler's at each
    real_collect, real_update = trainer.collect, trainer.update

    def spy(cfg, sampler, *args, **kw):
        used.append({k: v.clone() for k, v in sampler.state_dict().items()})
        return real_collect(cfg, sampler, *args, **kw)

    def spy_update(cfg, setup, model, *args, **kw):
        out = real_update(cfg, setup, model, *args, **kw)
        after_step.append({k: v.clone() for k, v in model.state_dict().items()})
        return out
    monkeypatch.setattr(trainer, "collect", spy)
    monkeypatch.setattr(trainer, "update", spy_update)
    train(replace(TINY, steps=6, changes={3: {"mismatch": "stale", "stale_steps": 1},
                                         5: {"stale_steps": 3}}), progress=False)
    same = lambda a, b: all(torch.equal(a[k], b[k]) for k in a)       # noqa: E731
    assert same(used[1], after_step[0])                                # step 2: fresh
    assert same(used[2], after_step[0]) and not same(used[2], after_step[1])   # step 3: 1 step old
    assert same(used[3], after_step[1])                                # step 4: 1 step old
    assert same(used[4], after_step[0]) and same(used[5], after_step[1])       # steps 5, 6: 3 old


def test_the_phases_are_ordinary_configs_the_oracle_covers():
    """What a change may set is what a config may set: every CHANGEABLE knob is a field, and a
    phase is replace(base, **knobs), the config the one-step oracle runs."""
    fields = set(vars(make_config("smoke")))
    assert set(CHANGEABLE) <= fields and not {"seed", "steps", "group_size", "n_layer"} & set(CHANGEABLE)
    cfg = make_config("smoke", changes={40: {"loss": "ppo", "eps_high": 0.28, "correction": "tis"}})
    assert cfg.at(40) == make_config("smoke", loss="ppo", eps_high=0.28, correction="tis")


def test_a_sampler_switched_to_bf16_mid_run_parts_from_the_learner_from_that_step():
    rows = train(replace(TINY, changes={3: {"sampler_precision": "bf16"}}), progress=False).rows
    gap = [r["mismatch/abs_logratio_p99"] for r in rows[1:]]                  # steps 1, 2, ...
    assert max(gap[:2]) < 1e-4 < min(gap[2:]), gap                            # float32 rounding, then bf16's
