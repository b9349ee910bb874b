"""The toy trainer: every loss variant trains, and the trainer calls course_lib's functions."""
import math
import warnings
import re
import statistics
import time
from dataclasses import replace

import pytest
import torch

import reference as ref
from course_lib import advantages, losses, rl
from course_lib.metrics import METRICS
from course_lib.rl import RunConfig, load_histories, make_config, save_histories, train, trainer
from course_lib.rl.policy import Rollout
from course_lib.rl import progress
from course_lib.toy.policy import sample
from course_lib.toy.task import EOS, PAD, AdditionTask, to_text
from course_lib.rl import loss_knobs
from course_lib.toy.warm_start import warm_start

TINY = RunConfig(steps=2, prompts_per_step=8, group_size=4, n_layer=1, d_model=32, n_head=2,
                 warm_steps=20, warm_target=None, warm_lr=1e-2, heldout_questions=64, eval_every=2,
                 lr=3e-3, warmup_steps=1, device="cpu",
                 overlong_penalty=True, overlong_cache=4)   # length-dependent rewards: signal in every group


pytestmark = pytest.mark.usefixtures("one_thread")      # tests/conftest.py


CORE_KEYS = ["reward/mean", "acc/sampled", "acc/heldout", "entropy/mean", "len/all", "kl/ref",
             "clip/low_frac", "clip/high_frac", "ratio/mean", "ratio/max", "groups/zero_signal_frac",
             "adv/pos_token_frac", "mismatch/abs_logratio_p99", "speed/sample_tok_s",
             "speed/learn_tok_s", "loss/policy"]


@pytest.mark.parametrize("name", ["ppo", "grpo", "dapo", "dr_grpo", "gspo", "cispo", "sapo"])
def test_every_loss_variant_runs_and_reports_finite_metrics(name):
    hist = train(replace(TINY, loss=name, minibatches=2), progress=False)
    rows = hist.rows[1:]
    assert len(rows) == TINY.steps
    for row in rows:
        assert all(k in METRICS for k in row if k != "step")
        for k in CORE_KEYS:
            if name == "gspo" and k.startswith("clip/"):
                k = k.replace("clip/", "clip_seq/")
            optional = k == "acc/heldout" or (k == "kl/ref" and row["step"] % TINY.eval_every)   # evaluations only
            assert k in row or optional, f"{name}: metric {k} missing"
            assert math.isfinite(row.get(k, 0.0)), f"{name}: {k} = {row.get(k)}"
    assert math.isfinite(hist.last("acc/heldout"))


def test_on_step_sees_each_row_once_in_order_outside_the_steps_clock():
    seen = []

    def on_step(row):
        seen.append(row)
        time.sleep(0.2)                     # a pause between steps: not a step's time, but elapsed time

    hist = train(TINY, progress=False, on_step=on_step)
    assert [r["step"] for r in seen] == [1, 2] and all(a is b for a, b in zip(seen, hist.rows[1:]))
    one, two = hist.rows[1:]
    assert two["time/elapsed_s"] - one["time/elapsed_s"] - two["time/step_s"] >= 0.2


# a reward the tiny policy can improve in a few steps: DAPO's overlong penalty past 3 tokens
LEARN = replace(TINY, steps=8, prompts_per_step=16, group_size=8, warm_steps=60, lr=1e-3,
                overlong_penalty=True, overlong_cache=3, eval_every=8)


def test_a_short_run_raises_the_reward_and_lowers_the_loss_on_a_fixed_batch():
    hist = train(LEARN, progress=False)
    rew = hist.series("reward/mean")[1]
    first, last = sum(rew[:2]) / 2, sum(rew[-3:]) / 3
    assert last > first + 0.05, f"reward {first:.3f} -> {last:.3f}: RL did not improve it"
    # a fixed batch from the starting policy, its advantages fixed; the sequence-level policy-
    # gradient loss -mean_i A_i log pi(y_i) must fall: the run made good answers likelier
    start, end = rl.build_model(LEARN), rl.build_model(LEARN)
    start.load_state_dict(warm_start(LEARN)[0])
    end.load_state_dict(hist.final_state)
    prompts = AdditionTask(heldout_questions=LEARN.heldout_questions).prompts("train")[:32].repeat_interleave(8, dim=0)
    roll = sample(start, prompts, LEARN.max_new_tokens, generator=torch.Generator().manual_seed(5))
    r = rl.shaped_rewards(LEARN, AdditionTask.reward(prompts, roll.responses), roll.mask.sum(1))
    adv = advantages.group_advantages(r, 8)                                      # [B]

    def seq_loss(model):
        with torch.no_grad():
            logp, _ = rl.learner_logp(model, prompts, roll.responses, LEARN.temperature)
        return float(-(adv * (logp * roll.mask).sum(dim=1)).mean())

    before, after = seq_loss(start), seq_loss(end)
    assert after < before - 0.3, f"loss on a fixed batch {before:.3f} -> {after:.3f}"


def test_lr_schedule_follows_its_formula():
    cfg = replace(TINY, lr=1e-3, lr_min=1e-4, warmup_steps=10)
    const = replace(cfg, lr_schedule="constant")
    assert rl.lr_at(const, 0, 101) == pytest.approx(1e-4)             # warm-up: lr (k+1)/10
    assert rl.lr_at(const, 4, 101) == pytest.approx(5e-4)
    assert rl.lr_at(const, 9, 101) == pytest.approx(1e-3)
    assert rl.lr_at(const, 100, 101) == pytest.approx(1e-3)
    cos = replace(cfg, lr_schedule="cosine")
    # lr_min + (lr - lr_min) (1 + cos(pi k / (N - 1))) / 2, times the warm-up factor
    assert rl.lr_at(cos, 0, 101) == pytest.approx(0.1 * 1e-3)
    assert rl.lr_at(cos, 25, 101) == pytest.approx(1e-4 + 9e-4 * (1 + math.sqrt(0.5)) / 2)
    assert rl.lr_at(cos, 50, 101) == pytest.approx(5.5e-4)
    assert rl.lr_at(cos, 75, 101) == pytest.approx(1e-4 + 9e-4 * (1 - math.sqrt(0.5)) / 2)
    assert rl.lr_at(cos, 100, 101) == pytest.approx(1e-4)
    floor = replace(cos, lr_min=3e-4)                                       # another floor than the default
    assert [rl.lr_at(floor, k, 101) for k in (50, 100)] == pytest.approx([6.5e-4, 3e-4])
    # and the trainer uses it: one optimiser step per RL step here, the row reports the last lr
    h = train(replace(cos, steps=3, warmup_steps=2), progress=False)
    assert h.series("lr")[1] == pytest.approx([0.5 * 1e-3, 5.5e-4, 1e-4])    # k = 0, 1, 2 of N = 3


def test_learner_logp_at_temperature_equals_the_samplers():
    torch.manual_seed(0)
    model = rl.build_model(TINY)
    prompts = AdditionTask(heldout_questions=64).prompts("heldout")[:32]
    for temp in (0.6, 1.5):
        roll = sample(model, prompts, TINY.max_new_tokens, temperature=temp,
                      generator=torch.Generator().manual_seed(1))
        logp, _ = rl.learner_logp(model, prompts, roll.responses, temp)
        assert (logp - roll.rollout_logp)[roll.mask].abs().max() < 1e-5


def _collected(rewards, G):
    r = torch.tensor(rewards)
    return rl.Collected(batch=None, rewards=r, correct=(r > 0).float(),
                             lengths=torch.full((len(r),), 3), truncated=torch.arange(len(r)) % 4 == 0,
                             seconds=1.0, tokens=1, flops=0.0)


def test_zero_signal_fraction_on_known_groups():
    # G = 4: [1 0 0 1] signal, [0 0 0 0] none, [1 1 1 1] none, [0.5 0 0 0] signal, [1 1 1 0] signal
    rewards = [1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0.5, 0, 0, 0, 1, 1, 1, 0]
    m = rl.sampling_metrics(_collected([float(x) for x in rewards], 4), 4)
    assert m["groups/zero_signal_frac"] == pytest.approx(2 / 5)
    assert m["samples/step"] == 20
    stds = [statistics.stdev(rewards[i:i + 4]) for i in range(0, 20, 4)]          # divisor G - 1
    assert m["reward/group_std"] == pytest.approx(sum(stds) / 5)
    assert m["len/truncated_frac"] == pytest.approx(5 / 20)


def test_entropy_at_temperature_one_is_the_policys_own_whatever_the_sampling_temperature():
    torch.manual_seed(0)
    model = rl.build_model(TINY)
    with torch.no_grad():                       # spread the logits: an untrained policy is near uniform
        model.head.weight.mul_(20.0)
    prompts = AdditionTask(heldout_questions=64).prompts("heldout")[:16].repeat_interleave(4, dim=0)
    roll = sample(model, prompts, TINY.max_new_tokens, generator=torch.Generator().manual_seed(1))
    batch = rl.Batch(prompts, roll.responses, roll.mask, roll.rollout_logp, torch.rand(64), model.eos_id,
                          model.pad_id)
    got = {}
    for temp in (1.0, 0.4):
        cfg = replace(TINY, prompts_per_step=16, temperature=temp)
        _, got[temp] = rl.targets(cfg, rl.loss_setup(cfg), model, model, batch)
    with torch.no_grad():                                   # by hand: softmax of the raw logits
        logits = rl.response_logits(model, prompts, roll.responses)
        logp = torch.log_softmax(logits.double(), -1)
        h = -(logp.exp() * logp).sum(-1)[roll.mask].mean()
    assert got[1.0]["entropy/t1"] == got[1.0]["entropy/mean"] == pytest.approx(float(h), rel=1e-5)
    assert got[0.4]["entropy/t1"] == pytest.approx(float(h), rel=1e-5)
    assert got[0.4]["entropy/mean"] < 0.8 * got[0.4]["entropy/t1"]


def test_dynamic_sampling_filter_keeps_the_first_groups_with_signal():
    G, P = 2, 3
    ids = lambda n, start: torch.arange(start, start + n)[:, None]               # noqa: E731
    rolls, rews = [], []
    for k, r in enumerate(([1., 1., 0., 1., 0., 0.], [1., 0., 1., 1., 0., 1.])):   # two rounds
        rolls.append(Rollout(prompts=ids(6, 10 * k), responses=ids(6, 100 + 10 * k),
                             mask=torch.ones(6, 1, dtype=torch.bool),
                             rollout_logp=-ids(6, 10 * k).float(), steps=1))
        rews.append(torch.tensor(r))
    b = rl.select_groups(rolls, rews, P, G, filter_signal=True, eos_id=EOS, pad_id=PAD)
    # signal groups: round 0 group 1 (rows 2, 3); round 1 groups 0 and 2 (rows 10, 11, 14, 15)
    assert b.prompts[:, 0].tolist() == [2, 3, 10, 11, 14, 15]
    assert b.responses[:, 0].tolist() == [102, 103, 110, 111, 114, 115]
    assert b.rewards.tolist() == [0., 1., 1., 0., 0., 1.]
    b = rl.select_groups(rolls, rews, P, G, filter_signal=False, eos_id=EOS, pad_id=PAD)
    assert b.prompts[:, 0].tolist() == [0, 1, 2, 3, 4, 5]                       # unfiltered: the first P
    assert rl.select_groups(rolls[:1], [torch.zeros(6)], P, G, filter_signal=True, eos_id=EOS,
                                  pad_id=PAD) is None


@pytest.mark.parametrize("dynamic, verifier, bonus", [(False, "exact", 0.0), (True, "exact", 0.0),
                                                     (False, "contains", 0.05)])
def test_collect_draws_shapes_and_filters_as_configured(dynamic, verifier, bonus):
    """collect() against the same draws done by hand: prompts, rewards (the verifier's verdict, the
    overlong penalty, the length bonus), and (dynamic sampling) only groups with signal, sampling
    again until P groups have it. The exact correctness is kept apart from the reward."""
    cfg = replace(TINY, warm_steps=0, dynamic_sampling=dynamic, max_sampling_rounds=3,
                  overlong_penalty=True, overlong_cache=4, verifier=verifier, length_bonus=bonus)
    torch.manual_seed(0)
    model = rl.build_model(cfg)
    train_prompts = AdditionTask(heldout_questions=cfg.heldout_questions).prompts("train")
    got = trainer.collect(cfg, model, train_prompts, torch.Generator().manual_seed(1),
                          torch.Generator().manual_seed(2), lambda ctx: 0.0)
    gen, cpu_gen = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    P, G, L = cfg.prompts_per_step, cfg.group_size, cfg.max_new_tokens
    kept, shaped, correct = [], [], []
    for _ in range(cfg.max_sampling_rounds if dynamic else 1):
        prompts = train_prompts[torch.randint(len(train_prompts), (P,), generator=cpu_gen)]
        prompts = prompts.repeat_interleave(G, dim=0)
        roll = sample(model, prompts, L, generator=gen)
        lengths = roll.mask.sum(1).tolist()
        exact = AdditionTask.reward(prompts, roll.responses).tolist()
        passed = exact if verifier == "exact" else [
            ref.contains_sum(to_text(p.tolist()), to_text(y.tolist()))
            for p, y in zip(prompts, roll.responses)]
        r = [c + ref.overlong_penalty(n, L, 4) + bonus * n for c, n in zip(passed, lengths)]
        shaped += r
        correct += exact
        for g in range(P):
            grp = r[g * G:(g + 1) * G]
            if not dynamic or any(x != grp[0] for x in grp):
                kept.append((prompts[g * G], grp))
        if not dynamic or len(kept) >= P:
            break
    kept = kept[:P]
    assert got.rewards.tolist() == pytest.approx(shaped)
    assert got.correct.tolist() == correct
    assert len(got.batch.rewards) == len(kept) * G
    assert got.batch.rewards.tolist() == pytest.approx([x for _, grp in kept for x in grp])
    assert torch.equal(got.batch.prompts[::G], torch.stack([p for p, _ in kept]))
    assert any(x < 0 for x in shaped)                                     # the penalty did bite
    if dynamic:
        assert len(got.rewards) > P * G                                  # it sampled again


def test_registered_custom_loss_is_called_by_the_trainer():
    calls = []

    def my_loss(logp, old_logp, adv, mask, *, eps_low=0.2, eps_high=0.2, agg="token-mean",
                max_len=None, is_weight=None):
        calls.append((tuple(logp.shape), logp.requires_grad, agg))
        return losses.ppo_loss(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high,
                               agg=agg, max_len=max_len, is_weight=is_weight)

    with losses.registered("test_spy_loss", my_loss):
        train(replace(TINY, loss="test_spy_loss", minibatches=2, epochs=2), progress=False)
    assert len(calls) == TINY.steps * 2 * 2                      # steps x epochs x minibatches
    assert all(grad for _, grad, _ in calls)
    assert calls[0][0][0] == TINY.prompts_per_step * TINY.group_size // 2


def test_trainer_passes_only_the_knobs_a_loss_accepts():
    cfg = replace(TINY, loss="gspo", eps_low=3e-4, eps_high=4e-4)
    knobs, agg = loss_knobs(losses.resolve_loss("gspo"), cfg)
    assert knobs == {"eps_low": 3e-4, "eps_high": 4e-4, "max_len": cfg.max_new_tokens}
    assert agg == "seq-mean-token-mean"                          # GSPO's own default
    knobs, agg = loss_knobs(losses.resolve_loss("sapo"), replace(TINY, tau_neg=2.0, agg="token-mean"))
    assert knobs["tau_neg"] == 2.0 and agg == "token-mean"
    with pytest.raises(ValueError, match="eps_high"):
        loss_knobs(losses.resolve_loss("sapo"), replace(TINY, loss="sapo", eps_high=0.28))


def test_correction_weight_reaches_the_loss_as_is_weight():
    seen = []

    def spy(logp, old_logp, adv, mask, *, agg="token-mean", max_len=None, is_weight=None):
        seen.append(is_weight)
        return losses.ppo_loss(logp, old_logp, adv, mask, agg=agg, max_len=max_len, is_weight=is_weight)

    train(replace(TINY, loss=spy, mismatch="noise", logits_noise=1.0, correction="tis"), progress=False)
    assert seen and all(w is not None for w in seen)
    assert max(float(w.max()) for w in seen) <= 2.0 + 1e-6      # TIS truncates at the cap
    seen.clear()
    train(replace(TINY, loss=spy), progress=False)
    assert seen and all(w is None for w in seen)


def test_no_mismatch_means_learner_and_sampler_logp_agree_and_noise_or_staleness_breaks_it():
    h = train(TINY, progress=False)
    assert max(h.series("mismatch/abs_logratio_max")[1]) < 1e-4
    h = train(replace(TINY, mismatch="noise", logits_noise=0.5), progress=False)
    assert min(h.series("mismatch/abs_logratio_max")[1]) > 0.01
    h = train(replace(TINY, steps=3, mismatch="stale", stale_steps=1), progress=False)
    gaps = h.series("mismatch/abs_logratio_max")[1]
    assert gaps[0] < 1e-4 and gaps[1] > 1e-4                     # fresh at step 1, one step old after


def test_kl_term_is_added_when_beta_is_positive():
    h0 = train(TINY, progress=False)
    h1 = train(replace(TINY, kl_coef=0.1, steps=3), progress=False)
    assert all(v == 0.0 for v in h0.series("kl/penalty")[1])
    pen = h1.series("kl/penalty")[1]
    assert all(v >= 0 for v in pen) and pen[-1] > 0              # k3 >= 0, and > 0 once the policy moved
    tot, pol = h1.series("loss/total")[1], h1.series("loss/policy")[1]
    assert tot[-1] == pytest.approx(pol[-1] + 0.1 * pen[-1], abs=1e-6)


def test_dynamic_sampling_updates_only_on_groups_with_signal():
    advs = []

    def spy(logp, old_logp, adv, mask, *, agg="token-mean", max_len=None, is_weight=None):
        advs.append(adv.view(-1, TINY.group_size))
        return losses.ppo_loss(logp, old_logp, adv, mask, agg=agg, max_len=max_len)

    h = train(replace(TINY, loss=spy, dynamic_sampling=True, steps=3), progress=False)
    for a in advs:
        assert (a.abs().sum(dim=1) > 0).all()                    # no all-zero-advantage group
    assert all(s >= TINY.batch_size for s in h.series("samples/step")[1])


def test_overlong_penalty_lowers_reward_of_long_responses():
    h0 = train(replace(TINY, warm_steps=0, overlong_penalty=False), progress=False)   # random policy:
    h1 = train(replace(TINY, warm_steps=0), progress=False)                          # long answers
    assert h1.first("reward/mean") < h0.first("reward/mean")


def test_config_rejects_bad_values_and_picks_device():
    with pytest.raises(ValueError, match="correction"):
        RunConfig(correction="is")
    with pytest.raises(ValueError, match="minibatches"):
        RunConfig(prompts_per_step=10, minibatches=3)
    with pytest.raises(ValueError, match="size"):
        make_config("tpu")
    with pytest.raises(ValueError, match="verifier"):
        RunConfig(verifier="substring")
    with pytest.raises(ValueError, match="length_bonus"):
        RunConfig(length_bonus=-0.1)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert RunConfig().resolved_device().type == expected
    assert make_config("gpu").batch_size > make_config("cpu").batch_size
    assert make_config("gpu").d_model > make_config("cpu").d_model


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_a_gpu_names_the_field_and_the_way_out():
    for device in ("cuda", "cuda:1"):
        with pytest.raises(ValueError, match=r"device='cuda.*sees no CUDA GPU; use device='auto'"):
            make_config("smoke", device=device).resolved_device()


def test_history_round_trips_through_json(tmp_path):
    h = train(TINY, progress=False)
    save_histories(tmp_path / "h.json", {"a": h, "b": [h, h]})
    back = load_histories(tmp_path / "h.json")
    assert back["a"].series("acc/heldout") == h.series("acc/heldout")
    assert len(back["b"]) == 2 and back["b"][1].config == h.config


def test_result_files_round_trip_through_columns(tmp_path):
    import json
    from course_lib.toy.experiments import from_columns, load_results, thin, to_columns
    h = train(TINY, progress=False)
    small = thin(h, ["acc/heldout", "reward/mean"], every=1)
    col = to_columns(small.to_json())
    assert from_columns(col).rows == small.rows
    path = tmp_path / "toy_x.json"
    path.write_text(json.dumps({"meta": {"finished": "now"}, "runs": {"a": [col]}}))
    meta, runs = load_results(path)
    got, want = runs["a"][0].series("reward/mean"), h.series("reward/mean")
    assert got[0] == want[0] and got[1] == pytest.approx(want[1], rel=1e-3)   # 4 significant digits


def test_clip_higher_mechanism_uses_one_batch_and_reports_both_bounds():
    from course_lib.toy.experiments import clip_higher_mechanism, zero_signal_share
    res = clip_higher_mechanism(replace(TINY, warm_steps=60), epochs=2)
    assert set(res) == {0.2, 0.28} and res[0.2]["n"] == res[0.28]["n"]          # the same batch
    assert all(0.0 <= r["high_frac"] <= 1.0 for r in res.values())
    rows = zero_signal_share(replace(TINY, warm_steps=60), temperatures=(1.0,), group_sizes=(2, 8),
                             n_prompts=8, per_prompt=8)
    by_g = {r["G"]: r for r in rows}
    assert by_g[8]["predicted"] <= by_g[2]["predicted"] + 1e-12     # E[p^G + (1-p)^G] falls with G
    assert all(0.0 <= r["measured"] <= 1.0 for r in rows)


def test_error_analysis_counts_wrong_prompts_by_kind():
    from course_lib.toy.experiments import error_analysis
    h = train(TINY, progress=False)
    ea = error_analysis(TINY, h.final_state)
    assert sum(n for _, n in ea["by_kind"].values()) == TINY.heldout_questions
    wrong = sum(round((1 - acc) * n) for acc, n in ea["by_kind"].values())
    assert wrong == ea["wrong"]
    assert ea["wrong"] == 0 or 0.0 <= ea["stuck"] <= 1.0
    acc10, n10 = ea["units_ten"]
    assert 0 < n10 < TINY.heldout_questions and (ea["wrong"] > 0 or acc10 == 1.0)


def test_notebook_progress_line_is_updated_in_place_and_ends_in_its_final_state(monkeypatch):
    """In a notebook the bar is one display updated through its id, so a stored notebook keeps
    the last state (100%, the postfix), not the 0% a widget's text fallback would keep."""
    import IPython.display
    shown, handles = [], []

    class Handle:
        def update(self, data, raw):
            shown.append(data["text/plain"])

    def display(data, raw, display_id):
        shown.append(data["text/plain"])
        handles.append(Handle())
        return handles[-1]

    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(progress, "_in_notebook", lambda: True)
    bar = progress.progress_bar(5, "run")
    for _ in range(5):
        bar.update(1)
    bar.set_postfix_str("held-out acc 0.500")
    bar.close()
    assert len(handles) == 1                                      # one output, updated in place
    assert shown[0].startswith("run:   0%") and "0/5" in shown[0]
    assert "100%" in shown[-1] and "5/5" in shown[-1] and "held-out acc 0.500" in shown[-1]
    assert all(len(line) <= 100 for line in shown)


def test_the_bar_says_what_runs_before_the_first_step(capsys):
    """A real model's start (loading it, measuring the held-out questions) takes minutes on a busy machine: the
    bar is up from the first second and names each part before step 1."""
    train(TINY, progress=True, desc="run")
    err = capsys.readouterr().err
    measured = re.search(r"held-out acc \d\.\d{3} before training", err)
    stages = [err.find("loading the policy"), err.find("held-out accuracy before training ("),
              measured.start() if measured else -1, err.find("2/2")]
    assert -1 not in stages and stages == sorted(stages), stages


@pytest.mark.parametrize("knobs, binds", [
    (dict(loss="dapo"), False), (dict(loss="gspo"), False), (dict(loss="cispo"), False), (dict(loss="sapo"), False),
    (dict(loss="grpo", eps_high=0.28), False),
    (dict(loss="grpo"), True),                                  # GRPO's own clip is not what the run is about
    (dict(loss="dapo", minibatches=2), True), (dict(loss="gspo", epochs=2), True),
    (dict(loss="cispo", old_logp_source="sampler", mismatch="noise"), True),   # pi_old from the sampler: r != 1
])
def test_a_clip_that_cannot_bind_is_named_and_warned_about(knobs, binds):
    from course_lib.rl.loss_step import ClipCannotBindWarning, clip_cannot_bind
    cfg = replace(TINY, **knobs)
    why = clip_cannot_bind(cfg)
    assert (why is None) == binds
    if why is not None:
        assert f"loss={cfg.loss!r}" in why and "every ratio is exactly 1" in why and "minibatches or epochs" in why
        with pytest.warns(ClipCannotBindWarning, match="cannot bind"):
            train(cfg, progress=False, stop_after=1)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ClipCannotBindWarning)
            train(cfg, progress=False, stop_after=1)


def test_a_clip_losses_ratio_is_exactly_one_where_the_warning_says_so():
    """What the warning rests on: one update per batch with pi_old from the learner leaves every ratio at 1."""
    from course_lib.rl.loss_step import ClipCannotBindWarning
    with pytest.warns(ClipCannotBindWarning):
        rows = train(replace(TINY, loss="dapo", eps_high=0.01, eps_low=0.01), progress=False).rows[1:]
    assert all(r["ratio/outside_frac"] == 0 and r["ratio/max"] == 1.0 for r in rows)
    rows = train(replace(TINY, loss="dapo", eps_high=0.01, eps_low=0.01, epochs=2), progress=False).rows[1:]
    assert any(r["ratio/outside_frac"] > 0 for r in rows)
