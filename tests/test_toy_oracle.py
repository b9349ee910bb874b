"""One-step oracle for the toy trainer: what one update must do, computed by hand.

For a fixed small batch (prompts, responses sampled from a tiny policy, sampler log-probs that
differ from the learner's, rewards with known groups) and a config, the expected advantages,
pi_old, correction weights, loss and d loss / d logp come from tests/reference.py (plain Python
loops, no course_lib); the expected parameter gradient is d logp / d theta (the learner's
log-softmax at the temperature, written out here) contracted with that d loss / d logp. The
trainer's own ``targets`` + ``update`` must give the same loss and the same gradient at every
optimiser step. Every knob of RunConfig that changes the update is covered.
"""
from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch

import reference as ref
from course_lib import rl
from course_lib.rl import trainer
from course_lib.rl.config import RunConfig
from course_lib.toy.policy import TinyGPT, sample
from course_lib.toy.task import EOS, PROMPT_LEN, AdditionTask

P, G, T_MAX = 4, 4, 6
# known groups: mixed 0/1, a zero-signal group, 3 of 4 right, shaped (overlong-penalised) values
REWARDS = [1.0, 0.0, 0.0, 1.0,  0.0, 0.0, 0.0, 0.0,  1.0, 1.0, 0.0, 1.0,  0.25, -0.5, 1.0, 0.0]
LR = 0.05
# "sampler" pi_old by default: its log-probs differ from the learner's, so ratios move off 1 and
# every clip, gate and correction is exercised at the first optimiser step
BASE = RunConfig(prompts_per_step=P, group_size=G, n_layer=1, d_model=16, n_head=2,
                 max_new_tokens=T_MAX, device="cpu", grad_clip=1e9, loss="ppo",
                 old_logp_source="sampler")
EXPECTED_AGG = {name: d["agg"] for name, d in ref.DEFAULTS.items()}   # each loss's own default
EXPECTED_STD = {"dr_grpo": False}                                     # Dr. GRPO: no std; others: std


pytestmark = pytest.mark.usefixtures("one_thread")      # tests/conftest.py


def make_models(temperature: float):
    torch.manual_seed(0)
    model = TinyGPT(1, 16, 2, block_size=PROMPT_LEN + T_MAX)
    with torch.no_grad():                      # spread the logits: a near-uniform policy is too easy
        model.head.weight.mul_(40.0)
    ref_model = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for p in ref_model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    prompts = AdditionTask(heldout_questions=64).prompts("heldout")[:P].repeat_interleave(G, dim=0)   # [B, Lp]
    roll = sample(model, prompts, T_MAX, temperature=temperature,
                  generator=torch.Generator().manual_seed(2))
    noise = 0.4 * torch.randn(roll.rollout_logp.shape, generator=torch.Generator().manual_seed(3))
    batch = rl.Batch(prompts=prompts, responses=roll.responses, mask=roll.mask,
                          rollout_logp=(roll.rollout_logp + noise) * roll.mask,   # a mismatched sampler
                          rewards=torch.tensor(REWARDS), eos_id=model.eos_id, pad_id=model.pad_id)
    return model, ref_model, batch


def hand_logp(model, batch, rows, temperature, *, with_all: bool = False):
    """log pi(token) at the temperature, [b, T], written out: softmax over logits / T (and, with
    ``with_all``, the whole distribution [b, T, V])."""
    seq = torch.cat([batch.prompts[rows], batch.responses[rows]], dim=1)
    logits = model(seq[:, :-1])[:, PROMPT_LEN - 1:].float()                 # [b, T, V]
    z = logits / temperature
    logp_all = z - torch.logsumexp(z, dim=-1, keepdim=True)
    logp = logp_all.gather(2, batch.responses[rows][..., None])[..., 0]
    return (logp, logp_all) if with_all else logp


def loss_mask(cfg, batch, rows) -> list:
    """The tokens the loss reads: the response's, without the responses that never ended when
    ``mask_truncated`` (a response ended iff it holds an EOS)."""
    mask = batch.mask[rows].tolist()
    if cfg.mask_truncated:
        ended = [EOS in r for r in batch.responses[rows].tolist()]
        mask = [[m and e for m in row] for row, e in zip(mask, ended)]
    return mask


def expected_step(cfg, model, ref_model, batch, rows, old_all, adv_all, w_all):
    """(loss, parameter gradients) one optimiser step on ``rows`` must produce."""
    name = cfg.loss
    agg = cfg.agg or EXPECTED_AGG[name]
    knobs = {k: getattr(cfg, k) for k in ("eps_low", "eps_high", "dual_clip", "tau_pos", "tau_neg")
             if getattr(cfg, k) is not None}
    r = rows.tolist()
    logp, logp_all = hand_logp(model, batch, rows, cfg.temperature, with_all=True)   # with grad
    mask = loss_mask(cfg, batch, rows)
    lp = logp.detach().double().tolist()
    value, dlogp = ref.policy_loss(name, lp, [old_all[i] for i in r], [adv_all[i] for i in r], mask,
                                   agg=agg, max_len=T_MAX,
                                   is_weight=None if w_all is None else [w_all[i] for i in r], **knobs)
    if cfg.kl_coef > 0:
        with torch.no_grad():
            ref_lp = hand_logp(ref_model, batch, rows, cfg.temperature).double().tolist()
        kl_tok = ref.kl_tokens(cfg.kl_estimator, lp, ref_lp, mask)
        alpha = ref.token_weights(mask, agg, T_MAX)
        value += cfg.kl_coef * ref.aggregate(kl_tok, mask, agg, T_MAX)
        dlogp = [[dlogp[b][t] + cfg.kl_coef * alpha[b][t] * ref.kl_token_grad(cfg.kl_estimator, lp[b][t], ref_lp[b][t])
                  for t in range(len(mask[0]))] for b in range(len(mask))]
    outputs, grad_outputs = [logp], [torch.tensor(dlogp, dtype=logp.dtype)]
    if cfg.entropy_coef:                    # - c * sum_bt alpha_bt H_bt, H = -sum_v p log p written out
        alpha = torch.tensor(ref.token_weights(mask, agg, T_MAX), dtype=logp.dtype)
        entropy = -(logp_all.exp() * logp_all).sum(-1)                               # [b, T]
        bonus = (alpha * entropy).sum()
        value -= cfg.entropy_coef * float(bonus.detach())
        outputs.append(-cfg.entropy_coef * bonus)
        grad_outputs.append(torch.ones(()))
    grads = torch.autograd.grad(outputs, list(model.parameters()), grad_outputs=grad_outputs, allow_unused=True)
    return value, [torch.zeros_like(p) if g is None else g for p, g in zip(model.parameters(), grads)]


class Recorder(torch.optim.SGD):
    """Plain SGD that keeps the gradient it was given at every step."""

    def __init__(self, params):
        super().__init__(params, lr=LR)
        self.grads = []

    def step(self, closure=None):
        self.grads.append([p.grad.clone() for p in self.param_groups[0]["params"]])
        return super().step(closure)


def run_oracle(cfg: RunConfig, tol: float = 2e-4, loss_atol: float = 1e-6):
    model, ref_model, batch = make_models(cfg.temperature)
    hand_model = copy.deepcopy(model)
    # what the trainer does
    setup = rl.loss_setup(cfg)
    opt = Recorder(model.parameters())
    metrics = trainer.learn(cfg, setup, model, ref_model, opt, batch, torch.Generator().manual_seed(7),
                               lambda: LR)
    metrics = rl.read_back(metrics)
    # what it must do
    rewards = batch.rewards.tolist()
    std = EXPECTED_STD.get(cfg.loss, True) if cfg.std_scaling is None else cfg.std_scaling
    adv = (ref.rloo_advantages(rewards, G) if cfg.adv_estimator == "rloo"
           else ref.batch_std_advantages(rewards, G) if std and cfg.std_scope == "batch"
           else ref.group_advantages(rewards, G, scale=std))
    all_rows = torch.arange(P * G)
    with torch.no_grad():
        learner = hand_logp(hand_model, batch, all_rows, cfg.temperature).double().tolist()
    rollout = batch.rollout_logp.double().tolist()
    mask = batch.mask.tolist()
    old = learner if cfg.old_logp_source == "learner" else rollout
    w = (None if cfg.correction == "none" else
         ref.correction_weights(cfg.correction, learner, rollout, mask, cfg.correction_cap,
                                cfg.correction_level))
    order_gen = torch.Generator().manual_seed(7)
    mb = P // cfg.minibatches
    values, steps, worst = [], 0, [0.0]
    for _ in range(cfg.epochs):
        order = torch.randperm(P, generator=order_gen)
        for k in range(cfg.minibatches):
            grp = order[k * mb:(k + 1) * mb]
            rows = (grp[:, None] * G + torch.arange(G)).reshape(-1)
            value, grads = expected_step(cfg, hand_model, ref_model, batch, rows, old, adv, w)
            values.append(value)
            got = opt.grads[steps]
            scale = max(float(g.abs().max()) for g in grads)
            assert scale > 1e-6, "the oracle batch must give a non-zero gradient"
            for name_p, g_exp, g_got in zip(dict(hand_model.named_parameters()), grads, got):
                err = float((g_exp - g_got).abs().max())
                assert err <= tol * scale, f"step {steps}: d loss / d {name_p} off by {err:.2e} (scale {scale:.2e})"
                worst[0] = max(worst[0], err / scale)
            with torch.no_grad():
                for p, g in zip(hand_model.parameters(), grads):
                    p.sub_(LR * g)
            steps += 1
    assert steps == len(opt.grads) == cfg.epochs * cfg.minibatches
    assert metrics["loss/total"] == pytest.approx(sum(values) / len(values), rel=1e-4, abs=loss_atol)
    metrics["worst_grad_error"] = worst[0]          # largest |error| / gradient scale over the steps
    return metrics, values


CASES = {
    **{f"loss={n}": dict(loss=n) for n in ("ppo", "grpo", "dapo", "dr_grpo", "gspo", "cispo", "sapo")},
    "loss=gspo,eps=0.05/0.1": dict(loss="gspo", eps_low=0.05, eps_high=0.1),
    "adv=rloo": dict(adv_estimator="rloo"),
    "grpo,std=False": dict(loss="grpo", std_scaling=False),
    "dr_grpo,std=True": dict(loss="dr_grpo", std_scaling=True),
    **{f"agg={a}": dict(agg=a) for a in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                         "seq-mean-token-sum-norm")},
    "eps=0.1/0.3": dict(eps_low=0.1, eps_high=0.3),
    "dual_clip=2": dict(dual_clip=2.0, eps_low=0.1, eps_high=0.1),
    "cispo,eps_high=0.1": dict(loss="cispo", eps_high=0.1),
    "sapo,tau=0.5/3": dict(loss="sapo", tau_pos=0.5, tau_neg=3.0),
    **{f"kl_coef=0.5,{k}": dict(kl_coef=0.5, kl_estimator=k) for k in ("k1", "k2", "k3")},
    "kl_coef=0.5,k2,dr_grpo": dict(loss="dr_grpo", kl_coef=0.5, kl_estimator="k2"),
    "pi_old=learner,epochs=2": dict(old_logp_source="learner", epochs=2),
    **{f"{c},{lvl},cap={cap}": dict(correction=c, correction_level=lvl, correction_cap=cap,
                                    old_logp_source="learner")
       for c in ("tis", "mis") for lvl in ("token", "sequence") for cap in (1.2, 3.0)},
    "T=0.7": dict(temperature=0.7),
    "T=1.4,pi_old=learner,epochs=2": dict(temperature=1.4, old_logp_source="learner", epochs=2),
    "minibatches=2,epochs=2": dict(minibatches=2, epochs=2),
    **{f"entropy_coef=0.05,{a}": dict(entropy_coef=0.05, agg=a) for a in ("token-mean", "seq-mean-token-mean")},
    "entropy_coef=0.05,kl,minibatches=2": dict(entropy_coef=0.05, kl_coef=0.5, minibatches=2),
    "std_scope=batch": dict(loss="grpo", std_scope="batch"),
    "std_scope=batch,std=False": dict(loss="grpo", std_scope="batch", std_scaling=False),
    **{f"mask_truncated,{a}": dict(mask_truncated=True, agg=a) for a in ("token-mean", "seq-mean-token-mean")},
    "mask_truncated,kl,pi_old=learner": dict(mask_truncated=True, kl_coef=0.5, old_logp_source="learner"),
}


@pytest.mark.parametrize("overrides", CASES.values(), ids=CASES.keys())
def test_one_update_matches_the_hand_computed_loss_and_gradient(overrides):
    run_oracle(replace(BASE, **overrides))


def test_the_oracle_batch_exercises_what_it_checks():
    """Ratios off 1 (clips active), corrections that truncate and drop, a zero-signal group."""
    model, ref_model, batch = make_models(1.0)
    cfg = replace(BASE, correction="mis", correction_cap=1.2, old_logp_source="learner")
    setup = rl.loss_setup(replace(BASE, eps_low=0.1, eps_high=0.1))
    tg, m = rl.targets(cfg, setup, model, ref_model, batch)
    assert 0.05 < m["is/zero_frac"] < 0.95                          # MIS drops some tokens, not all
    _, stats = setup.fn(tg.old_logp, batch.rollout_logp, tg.adv, batch.mask, **setup.knobs)
    assert stats["clip/low_frac"] + stats["clip/high_frac"] > 0.05  # the sampler's pi_old clips
    assert (tg.adv.view(P, G).abs().sum(dim=1) == 0).sum() == 1     # one group without signal
    ended = (batch.responses == EOS).any(dim=1)
    assert 0 < int(ended.sum()) < P * G                             # mask_truncated drops some rows


def test_each_knob_visibly_changes_the_update_on_the_oracle_batch():
    """The knobs the oracle covers visibly change the update (else the oracle could not fail)."""
    base, _ = run_oracle(BASE)
    for overrides in (dict(adv_estimator="rloo"), dict(std_scaling=False), dict(kl_coef=0.5),
                      dict(temperature=0.7), dict(old_logp_source="learner"), dict(entropy_coef=0.05),
                      dict(std_scope="batch"), dict(mask_truncated=True)):
        other, _ = run_oracle(replace(BASE, **overrides))
        assert not math.isclose(other["loss/total"], base["loss/total"], rel_tol=1e-3), overrides


# ---- precision: bf16 autocast costs about 1-3% of the gradient; fp32 agrees to 1e-6 ---------------
BF16_TOL = 5e-2          # measured: 1.2-2.8% of the largest gradient entry on this batch
BF16_LOSS_ATOL = 5e-3    # bfloat16 rounds a log-prob to about 2^-8 of itself; advantages are of order 1
BF16_CASES = {**{f"loss={n}": dict(loss=n) for n in ("ppo", "grpo", "dapo", "dr_grpo", "cispo", "sapo")},
              "kl_coef=0.5": dict(kl_coef=0.5),
              "tis,pi_old=learner": dict(correction="tis", old_logp_source="learner")}


@pytest.mark.parametrize("overrides", BF16_CASES.values(), ids=BF16_CASES.keys())
def test_bf16_autocast_gives_the_update_within_what_bf16_costs(overrides):
    metrics, _ = run_oracle(replace(BASE, precision="bf16", **overrides), tol=BF16_TOL, loss_atol=BF16_LOSS_ATOL)
    # and the knob is not ignored: bf16's error is far above float32's (about 1e-6 here)
    assert metrics["worst_grad_error"] > 1e-3, metrics["worst_grad_error"]


def test_bf16_moves_gspos_update_far_more_its_clip_band_is_finer_than_bf16():
    """GSPO's band (1 - 3e-4, 1 + 4e-4) on the sequence ratio is narrower than bfloat16's resolution
    (8 mantissa bits: about 4e-3 relative), so which sequences clip changes with the arithmetic."""
    fp32, _ = run_oracle(replace(BASE, loss="gspo"))
    bf16, _ = run_oracle(replace(BASE, loss="gspo", precision="bf16"), tol=10.0, loss_atol=1.0)
    assert fp32["worst_grad_error"] < 1e-5 and bf16["worst_grad_error"] > 0.1, (fp32, bf16)


def test_tf32_is_refused_on_a_cpu_with_the_way_out():
    with pytest.raises(ValueError, match="tf32.*CUDA.*'fp32' or 'bf16'"):
        run_oracle(replace(BASE, precision="tf32"))


# ---- no wasted work: the forwards each config needs, and no other ---------------------------------
def _count_forwards(model):
    calls = {"grad": 0, "no_grad": 0}

    def hook(module, args):
        calls["grad" if torch.is_grad_enabled() else "no_grad"] += 1
    model.register_forward_pre_hook(hook)
    return calls


@pytest.mark.parametrize("overrides", [dict(), dict(correction="tis"), dict(kl_coef=0.5, loss="dr_grpo"),
                                       dict(micro_batches=3), dict(micro_batches=2, correction="tis")],
                         ids=["grpo", "tis", "kl", "micro", "micro-tis"])
def test_pi_old_from_the_loss_forward_gives_the_update_of_a_separate_forward(overrides):
    """One optimiser step, pi_old from the learner: the loss forward's own log-probs, detached, are
    pi_old (no second forward), and the update, loss and metrics are those of the separate forward.
    In micro-batches each piece's forward fills its own rows' targets (``BatchTargets`` in its "pieces" mode)."""
    got = {}
    for mode in ("auto", "separate"):
        cfg = replace(BASE, old_logp_source="learner", old_logp_forward=mode, **overrides)
        model, ref_model, batch = make_models(1.0)
        calls, ref_calls = _count_forwards(model), _count_forwards(ref_model)
        opt = Recorder(model.parameters())
        metrics = trainer.learn(cfg, rl.loss_setup(cfg), model, ref_model, opt, batch,
                                   torch.Generator().manual_seed(7), lambda: LR, with_ref=cfg.kl_coef > 0)
        got[mode] = (rl.read_back(metrics), opt.grads[0], dict(calls), dict(ref_calls))
    (m_a, g_a, c_a, r_a), (m_s, g_s, c_s, r_s) = got["auto"], got["separate"]
    M = overrides.get("micro_batches", 1)
    assert c_a == {"grad": M, "no_grad": 0} and c_s == {"grad": M, "no_grad": 1}
    assert r_a == r_s == {"grad": 0, "no_grad": int(overrides.get("kl_coef", 0) > 0)}
    for a, b in zip(g_a, g_s):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)
    for k in m_s:
        if not k.startswith(("time/", "speed/", "flops/")):
            assert m_a[k] == pytest.approx(m_s[k], rel=1e-6, abs=1e-9), k
    assert m_a["flops/targets"] < m_s["flops/targets"]


def test_several_updates_per_batch_still_recompute_pi_old_before_the_first():
    cfg = replace(BASE, old_logp_source="learner", minibatches=2)
    assert not rl.reuses_loss_forward(cfg) and rl.reuses_loss_forward(replace(cfg, minibatches=1))
    assert not rl.reuses_loss_forward(replace(cfg, minibatches=1, old_logp_source="sampler"))
    model, ref_model, batch = make_models(1.0)
    calls = _count_forwards(model)
    trainer.learn(cfg, rl.loss_setup(cfg), model, ref_model, torch.optim.SGD(model.parameters(), lr=LR),
                  batch, torch.Generator().manual_seed(7), lambda: LR)
    assert calls == {"grad": 2, "no_grad": 1}


def test_the_reference_forward_runs_only_for_a_kl_term_an_evaluation_or_the_monitor():
    small = dict(steps=3, eval_every=2, prompts_per_step=4, group_size=4, n_layer=1, d_model=16, n_head=2,
                 warm_steps=0, heldout_questions=16, device="cpu")
    has_kl = lambda h: [r["step"] for r in h.rows[1:] if "kl/ref" in r]            # noqa: E731
    assert has_kl(trainer.train(RunConfig(**small), progress=False)) == [2, 3]     # evaluations, last step
    assert has_kl(trainer.train(RunConfig(**small, monitor_kl_ref=True), progress=False)) == [1, 2, 3]
    assert has_kl(trainer.train(RunConfig(**small, kl_coef=0.1), progress=False)) == [1, 2, 3]


def test_the_targets_flops_count_the_reference_forward_exactly_when_it_runs():
    """flops/targets counts the forwards without gradient of the whole batch: pi_old's (none when the
    loss forward gives it: one optimiser step per batch) and the reference's (a KL term, an evaluation
    step: step 2 here). One forward of the batch is a third of flops/learn (one epoch: every row once,
    forward and backward)."""
    small = dict(steps=2, eval_every=2, prompts_per_step=4, group_size=4, n_layer=1, d_model=16, n_head=2,
                 warm_steps=0, heldout_questions=16, device="cpu")
    passes = {"fused": ({}, [0, 1]), "fused,kl": (dict(kl_coef=0.1), [1, 1]),
              "minibatches=2": (dict(minibatches=2), [1, 2]),
              "minibatches=2,kl": (dict(minibatches=2, kl_coef=0.1), [2, 2])}
    for name, (kw, want) in passes.items():
        rows = trainer.train(RunConfig(**small, **kw), progress=False).rows[1:]
        got = [r["flops/targets"] / (r["flops/learn"] / 3) for r in rows]
        assert got == pytest.approx(want, rel=1e-12), f"{name}: {got} forwards, expected {want}"


def test_the_norm_mode_divides_every_term_by_the_configured_budget_not_the_batchs_length():
    """seq-mean-token-sum-norm divides by L_max = max_new_tokens (Dr. GRPO's constant), in the policy
    term, the KL term and the entropy bonus alike: doubling the budget halves each of them on the same
    responses (this batch is 6 tokens wide)."""
    model, ref_model, batch = make_models(1.0)
    rows = torch.arange(P * G)
    parts = {}
    for budget in (T_MAX, 2 * T_MAX):
        cfg = replace(BASE, loss="dr_grpo", max_new_tokens=budget, kl_coef=0.5, entropy_coef=0.05)
        setup = rl.loss_setup(cfg)
        assert setup.agg == "seq-mean-token-sum-norm"
        tg, _ = rl.targets(cfg, setup, model, ref_model, batch)
        logp, logp_all = rl.learner_logp(model, batch.prompts, batch.responses, cfg.temperature)
        total, pg, kl_term, stats = rl.policy_loss(cfg, setup, logp, batch, tg, rows, logp_all)
        parts[budget] = [float(x.detach()) for x in (pg, kl_term, stats["loss/entropy_bonus"])]
    assert all(abs(x) > 1e-4 for x in parts[T_MAX])
    assert parts[2 * T_MAX] == pytest.approx([x / 2 for x in parts[T_MAX]], rel=1e-5)
