"""course_lib against verl 0.9.1's own functions, and TRL 1.16.0's GRPOTrainer loss code: values and
gradients on random padded batches.

Runs in the peers environment (`make peers`); `make test` skips it otherwise. Where the two differ by
a documented convention, the test undoes that difference (and says so in the comparison's name) and
checks that nothing else differs. With PEERS_RECORD_DIR set, every comparison's largest differences
are written to verl_agreement.json there, which chapter 09 shows.
"""
from __future__ import annotations

import json
import os
import types

import numpy as np
import pytest
import torch

from conftest import REASON                                       # noqa: E402

ca = pytest.importorskip("verl.trainer.ppo.core_algos", reason=REASON)
from verl.trainer.ppo import rollout_corr_helper as rc          # noqa: E402
from verl.utils import torch_functional as verl_F                # noqa: E402

from course_lib import advantages, aggregation, corrections, kl, losses, rewards   # noqa: E402
from course_lib import frameworks as fw                                           # noqa: E402

RESULTS: dict[str, dict] = {}
P, G, T = 3, 4, 9
B = P * G


def record(name: str, ours: torch.Tensor, theirs: torch.Tensor, ours_grad=None, theirs_grad=None,
           atol: float = 1e-8) -> None:
    """Assert agreement (float64, up to the 1e-8 verl adds to its per-sequence token counts) and keep
    the largest differences for chapter 09's table."""
    dv = float((ours.detach().double() - theirs.detach().double()).abs().max())
    dg = None if ours_grad is None else float((ours_grad - theirs_grad).abs().max())
    RESULTS[name] = {"value": dv, "grad": dg}
    assert dv <= atol, f"{name}: values differ by {dv:.2e}"
    if dg is not None:
        assert dg <= atol, f"{name}: gradients differ by {dg:.2e}"


@pytest.fixture(scope="module", autouse=True)
def write_results():
    yield
    path = os.environ.get("PEERS_RECORD_DIR")
    if path:
        import trl
        import verl
        with open(os.path.join(path, "verl_agreement.json"), "w") as f:
            json.dump({"verl": verl.__version__, "trl": trl.__version__, "torch": torch.__version__,
                       "checks": RESULTS}, f, indent=1)


def batch(seed: int = 0, spread: float = 0.3):
    """Random float64 batch: B = P x G responses of varying length, one with a masked stretch inside
    (a tool output), log-probs with log-ratios of size ``spread``, continuous rewards."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]                         # [B, T]
    mask[0, 1:3] = False                                                      # a masked stretch
    mask[0, 0] = mask[0, 3] = True
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3             # [B, T]
    logp = old + spread * torch.randn(B, T, generator=g, dtype=torch.float64)
    logp[1, :2] = old[1, :2] + torch.tensor([1.5, -1.5], dtype=torch.float64)   # ratios 4.5 and 0.22:
    logp[2, :2] = old[2, :2] + torch.tensor([-1.5, 1.5], dtype=torch.float64)   # dual clip, clip bind
    ref = old + spread * torch.randn(B, T, generator=g, dtype=torch.float64)
    rew = torch.rand(B, generator=g, dtype=torch.float64)                     # [B]
    adv = torch.randn(B, generator=g, dtype=torch.float64)                    # [B]
    return mask, old, logp, ref, rew, adv


def outcome_rewards(rew: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """verl's token_level_rewards: the scalar reward on each row's last valid token."""
    last = (mask.long().cumsum(-1) == mask.sum(-1, keepdim=True)) & mask
    return torch.where(last, rew[:, None], torch.zeros_like(last, dtype=rew.dtype))


def config(policy_loss=None, **kw):
    """A verl ActorConfig holding only the fields its losses read (the rest of it needs a cluster);
    ``policy_loss``: keyword arguments of its PolicyLossConfig (verl's defaults otherwise)."""
    from verl.workers.config import ActorConfig, PolicyLossConfig
    fields = {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0,
              "tau_pos": 1.0, "tau_neg": 1.05, "global_batch_info": {},
              "policy_loss": PolicyLossConfig(**(policy_loss or {}))}
    fields.update(kw)
    cfg = ActorConfig.__new__(ActorConfig)
    for key, value in fields.items():
        object.__setattr__(cfg, key, value)
    return cfg


# ---- advantages ------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [True, False], ids=["grpo", "dr_grpo"])
def test_group_advantages_match_verl(scale):
    mask, *_, rew, _ = batch()
    index = np.repeat(np.arange(P), G)
    theirs, _ = ca.compute_grpo_outcome_advantage(outcome_rewards(rew, mask), mask.double(), index,
                                                  epsilon=1e-6, norm_adv_by_std_in_grpo=scale)
    ours = advantages.group_advantages(rew, G, scale=scale, eps=1e-6)
    record(f"advantage: {'GRPO' if scale else 'Dr. GRPO'}", ours[:, None] * mask, theirs)


def test_rloo_advantages_match_verl():
    mask, *_, rew, _ = batch()
    theirs, _ = ca.compute_rloo_outcome_advantage(outcome_rewards(rew, mask), mask.double(),
                                                  np.repeat(np.arange(P), G))
    record("advantage: RLOO", advantages.rloo_advantages(rew, G)[:, None] * mask, theirs)


def test_gae_returns_match_and_advantages_match_after_verls_whitening():
    mask, old, *_ = batch()
    g = torch.Generator().manual_seed(1)
    r_tok = torch.randn(B, T, generator=g, dtype=torch.float64) * mask
    values = torch.randn(B, T, generator=g, dtype=torch.float64) * mask
    adv_v, ret_v = ca.compute_gae_advantage_return(r_tok, values, mask.double(), gamma=0.99, lam=0.95)
    adv, ret = advantages.gae(r_tok, values, mask, gamma=0.99, lam=0.95)
    record("GAE: returns", ret * mask, ret_v * mask)
    # convention: verl whitens the advantages over the batch's valid tokens; course_lib returns them raw
    record("GAE: advantages (course_lib's whitened by verl's masked_whiten)",
           verl_F.masked_whiten(adv, mask.double()) * mask, adv_v * mask, atol=1e-7)


# ---- the other advantage estimators ---------------------------------------------------------------
INDEX = np.repeat(np.arange(P), G)


def test_reinforce_pp_matches_verl_with_token_rewards_and_a_masked_stretch():
    mask, *_ = batch()
    r_tok = torch.randn(B, T, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * mask
    theirs, ret = ca.compute_reinforce_plus_plus_outcome_advantage(
        r_tok, mask.double(), config=types.SimpleNamespace(gamma=0.9))
    record("advantage: REINFORCE++ returns (gamma 0.9)", advantages.discounted_returns(r_tok, mask, 0.9), ret * mask)
    record("advantage: REINFORCE++ (gamma 0.9, token rewards)",
           advantages.reinforce_pp_advantages(r_tok, mask, gamma=0.9), theirs * mask, atol=1e-7)


def test_reinforce_pp_baseline_matches_verl():
    mask, *_, rew, _ = batch()
    theirs, _ = ca.compute_reinforce_plus_plus_baseline_outcome_advantage(outcome_rewards(rew, mask),
                                                                         mask.double(), INDEX)
    record("advantage: REINFORCE++-baseline",
           advantages.reinforce_pp_baseline_advantages(rew, mask, G), theirs * mask, atol=1e-7)


def test_remax_matches_verl():
    mask, *_, rew, _ = batch()
    greedy = torch.rand(B, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    theirs, _ = ca.compute_remax_outcome_advantage(outcome_rewards(rew, mask), greedy, mask.double())
    ours = advantages.remax_advantages(advantages.last_token_rewards(rew, mask), greedy, mask)
    record("advantage: ReMax", ours, theirs * mask)


def test_opo_matches_verl():
    mask, *_, rew, _ = batch()
    theirs, _ = ca.compute_opo_outcome_advantage(outcome_rewards(rew, mask), mask.double(), INDEX)
    ours = advantages.opo_advantages(rew, G, mask.sum(-1))
    record("advantage: OPO (length-weighted baseline)", ours[:, None] * mask, theirs)


@pytest.mark.parametrize("scale", [True, False])
def test_passk_matches_verl(scale):
    mask, *_, rew, _ = batch()
    theirs, _ = ca.compute_grpo_passk_outcome_advantage(outcome_rewards(rew, mask), mask.double(), INDEX,
                                                        config={"norm_adv_by_std_in_grpo": scale})
    ours = advantages.passk_advantages(rew, G, scale=scale)
    record(f"advantage: pass@k ({'std-scaled' if scale else 'unscaled'})", ours[:, None] * mask, theirs)


def test_gpg_advantage_matches_verl():
    mask, *_, rew, _ = batch()
    rew = torch.where(torch.arange(B) % 3 == 0, torch.zeros_like(rew), rew)     # alpha = B / #nonzero = 1.5
    theirs, _ = ca.compute_gpg_outcome_advantage(outcome_rewards(rew, mask), mask.double(), INDEX)
    record("advantage: GPG (alpha = B / nonzero rewards)", advantages.gpg_advantages(rew, G)[:, None] * mask, theirs)


@pytest.mark.parametrize("scale", [True, False])
def test_gdpo_matches_verl_with_two_reward_components(scale):
    mask, *_, rew, _ = batch()
    fmt = (torch.rand(B, generator=torch.Generator().manual_seed(4)) > 0.5).double()
    comps = torch.stack([rew, fmt], dim=1)                                         # [B, 2]
    prompts = torch.ones(B, 2, dtype=torch.long)
    theirs, _ = ca.compute_gdpo_outcome_advantage(
        outcome_rewards(rew, mask), mask.double(), INDEX, norm_adv_by_std_in_grpo=scale,
        config={"gdpo_reward_keys": ["acc", "fmt"], "gdpo_reward_weights": [1.0, 0.5]},
        non_tensor_batch={"acc": rew.numpy(), "fmt": fmt.numpy()},
        batch={"prompts": prompts, "attention_mask": torch.cat([torch.ones(B, 2), mask.double()], 1).long()})
    ours = advantages.gdpo_advantages(comps, G, mask, weights=[1.0, 0.5], scale=scale)
    # verl reads the components as float32 (np.float32): agreement to float32's precision
    record(f"advantage: GDPO (2 components, weights 1 and 0.5{'' if scale else ', unscaled'}; "
           "verl reads them in float32)", ours, theirs * mask, atol=1e-5)


def _otb_inputs(holes: bool):
    mask, old, *_ = batch()
    if not holes:
        mask = torch.arange(T)[None, :] < mask.sum(-1, keepdim=True)              # the same lengths, no holes
    g = torch.Generator().manual_seed(6)
    r_tok = torch.randn(B, T, generator=g, dtype=torch.float64) * mask
    p = old.exp()
    sum_sq = p ** 2 + (1 - p) ** 2 * torch.rand(B, T, generator=g, dtype=torch.float64)
    w = 0.5 + torch.rand(B, T, generator=g, dtype=torch.float64)
    return r_tok, mask, old, sum_sq, w


@pytest.mark.parametrize("zero_tail", [True, False])
@pytest.mark.parametrize("tir", [False, True], ids=["otb", "tir_otb"])
def test_optimal_token_baseline_matches_verl(tir, zero_tail):
    r_tok, mask, old, sum_sq, w = _otb_inputs(holes=True)
    verl_fn = (ca.compute_multi_turn_optimal_token_baseline_advantage if tir
               else ca.compute_optimal_token_baseline_advantage)
    ours_fn = (advantages.tir_optimal_token_baseline_advantages if tir
               else advantages.optimal_token_baseline_advantages)
    theirs, _ = verl_fn(r_tok, mask.double(), INDEX, old, sum_sq, rollout_is_weights=w, handle_zero_tail=zero_tail)
    ours = ours_fn(r_tok, mask, G, old, sum_sq, is_weight=w, zero_tail=zero_tail)
    name = "multi-turn optimal token baseline" if tir else "optimal token baseline"
    record(f"advantage: {name} (IS weight{', zero tail' if zero_tail else ''}, a masked stretch)",
           ours, theirs * mask)


def test_the_two_token_baselines_differ_only_where_a_response_has_a_masked_stretch():
    for holes in (False, True):
        r_tok, mask, old, sum_sq, _ = _otb_inputs(holes)
        a = advantages.optimal_token_baseline_advantages(r_tok, mask, G, old, sum_sq)
        b = advantages.tir_optimal_token_baseline_advantages(r_tok, mask, G, old, sum_sq)
        assert (float((a - b).abs().max()) > 1e-3) == holes


# ---- aggregation and KL ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                  "seq-mean-token-sum-norm", "token-sum"])
def test_aggregation_modes_match_verl_values_and_gradients(mode):
    mask, old, logp, *_ = batch()
    x1 = logp.clone().requires_grad_(True)
    x2 = logp.clone().requires_grad_(True)
    ours = aggregation.aggregate(x1, mask, mode)
    theirs = ca.agg_loss(x2, mask.double(), mode)
    ours.backward()
    theirs.backward()
    record(f"aggregation: {mode}", ours, theirs, x1.grad * mask, x2.grad * mask)


@pytest.mark.parametrize("kind, verl_name", [("k1", "k1"), ("k2", "k2"), ("k3", "low_var_kl")])
def test_kl_estimators_match_verl_values_and_gradients(kind, verl_name):
    mask, old, logp, ref, *_ = batch(spread=0.5)
    x1 = logp.clone().requires_grad_(True)
    x2 = logp.clone().requires_grad_(True)
    ours = kl.kl_estimate(x1, ref, mask, kind)
    theirs = ca.kl_penalty(x2, ref, verl_name)
    (ours * mask).sum().backward()
    (theirs * mask).sum().backward()
    assert float((theirs * mask).max()) < 10                       # below verl's k3 cap (tested below)
    record(f"KL: {kind}", ours * mask, theirs * mask, x1.grad * mask, x2.grad * mask)


def test_k3_differs_from_verl_only_past_verls_cap_of_10():
    logp = torch.tensor([[0.0, -15.0]], dtype=torch.float64)
    ref = torch.zeros_like(logp)
    mask = torch.ones_like(logp, dtype=torch.bool)
    ours = kl.kl_estimate(logp, ref, mask, "k3")
    theirs = ca.kl_penalty(logp, ref, "low_var_kl")
    assert ours[0, 0] == theirs[0, 0] == 0 and theirs[0, 1] == 10 and ours[0, 1] > 1e6


def test_adaptive_kl_controller_matches_verl():
    ctl = ca.AdaptiveKLController(init_kl_coef=0.1, target_kl=0.05, horizon=1000)
    beta, diffs = 0.1, []
    for current in (0.02, 0.05, 0.2, 0.07, 0.0):
        ctl.update(current, n_steps=64)
        beta = kl.adaptive_kl_update(beta, current, 0.05, 64, 1000)
        diffs.append(abs(beta - ctl.value))
    record("adaptive KL controller", torch.tensor(max(diffs)), torch.tensor(0.0), atol=1e-15)


# ---- policy losses ---------------------------------------------------------------------------
def _both(our_fn, verl_fn, weight_level="token", probabilities=False, seed=None, **our_kw):
    """Run our loss and verl's on the same batch with a random IS weight (one per token, one per
    response, or none); return values and d loss / d logp. probabilities=True keeps every logp
    below 0 (losses that read pi itself); ``seed``: torch's global generator is reset to it before
    each call (losses that draw tokens at random)."""
    mask, old, logp, _, _, adv = batch()
    if probabilities:
        logp = logp.clamp(max=-1e-3)
    shape = (B, T) if weight_level == "token" else (B, 1)
    w = torch.rand(*shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 2 * mask
    w = None if weight_level is None else w
    x1 = logp.clone().requires_grad_(True)
    x2 = logp.clone().requires_grad_(True)
    if seed is not None:
        torch.manual_seed(seed)
    ours, _ = our_fn(x1, old, adv, mask, is_weight=w, **our_kw)
    if seed is not None:
        torch.manual_seed(seed)
    theirs, _ = verl_fn(x2, old, adv[:, None] * mask, mask.double(), w)
    ours.backward()
    theirs.backward()
    return ours, theirs, x1.grad * mask, x2.grad * mask


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("eps_low, eps_high", [(0.2, 0.2), (0.2, 0.28)], ids=["ppo", "clip-higher"])
def test_ppo_family_matches_verls_vanilla_loss_with_dual_clip(agg, eps_low, eps_high):
    cfg = config(clip_ratio_low=eps_low, clip_ratio_high=eps_high)
    verl_fn = lambda lp, old, adv, m, w: ca.compute_policy_loss_vanilla(        # noqa: E731
        old, lp, adv, m, loss_agg_mode=agg, config=cfg, rollout_is_weights=w)
    o, t, go, gt = _both(losses.ppo_loss, verl_fn, eps_low=eps_low, eps_high=eps_high, dual_clip=3.0, agg=agg)
    record(f"loss: PPO eps=({eps_low}, {eps_high}), dual clip 3, {agg}, IS weight", o, t, go, gt)


def _gspo(weight_level, agg="seq-mean-token-mean"):
    cfg = config(clip_ratio_low=3e-4, clip_ratio_high=4e-4)
    verl_fn = lambda lp, old, adv, m, w: ca.compute_policy_loss_gspo(           # noqa: E731
        old, lp, adv, m, loss_agg_mode=agg, config=cfg, rollout_is_weights=w)
    return _both(losses.gspo_loss, verl_fn, weight_level, eps_low=3e-4, eps_high=4e-4, agg=agg)


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "token-mean"])
def test_gspo_matches_verl_with_one_is_weight_per_response(agg):
    # verl 0.9.1's GSPO aggregates with loss_agg_mode like every other loss (SAPO excepted): the two
    # modes give different losses, and each matches course_lib's GSPO under the same mode
    o, t, go, gt = _gspo("sequence", agg)
    name = "loss: GSPO, sequence-level IS weight (log ratios below verl's cap of 10)"
    record(name if agg == "seq-mean-token-mean" else f"loss: GSPO, {agg} (verl follows loss_agg_mode)",
           o, t, go, gt)


def test_verls_gspo_loss_depends_on_loss_agg_mode():
    (a, *_), (b, *_) = _gspo("sequence", "seq-mean-token-mean"), _gspo("sequence", "token-mean")
    assert abs(float(a - b)) > 1e-3


def test_gspo_gradient_differs_from_verls_token_form_when_the_is_weight_varies_inside_a_response():
    # verl writes GSPO in its "GSPO-token" form, s_i,t = sg[s_i] pi_t / sg[pi_t]: a token's IS weight
    # then scales only that token's gradient. course_lib's sequence form spreads a response's mean
    # weight over all its tokens. Same loss value; gradients differ only with per-token weights.
    o, t, go, gt = _gspo("token")
    RESULTS["loss: GSPO, token-level IS weight (value only; gradients differ, see chapter 09)"] = {
        "value": float((o - t).detach().abs()), "grad": float((go - gt).abs().max())}
    assert float((o - t).abs()) < 1e-8 and float((go - gt).abs().max()) > 1e-3


def test_cispo_matches_verl_when_verls_lower_bound_is_off():
    # convention: verl reads CISPO's lower bound from clip_ratio_low (1 - 10 < 0: no bound, as in
    # verl's example); course_lib's eps_low=None means no lower bound
    cfg = config(clip_ratio_low=10.0, clip_ratio_high=0.28)
    verl_fn = lambda lp, old, adv, m, w: ca.compute_policy_loss_cispo(          # noqa: E731
        old, lp, adv, m, loss_agg_mode="token-mean", config=cfg, rollout_is_weights=w)
    o, t, go, gt = _both(losses.cispo_loss, verl_fn, eps_low=None, eps_high=0.28)
    record("loss: CISPO (verl clip_ratio_low=10 = no lower bound)", o, t, go, gt)


def test_sapo_matches_verl_at_its_fixed_sequence_mean():
    # convention: verl's SAPO always aggregates with seq-mean-token-mean, whatever loss_agg_mode says
    verl_fn = lambda lp, old, adv, m, w: ca.compute_policy_loss_sapo(           # noqa: E731
        old, lp, adv, m, loss_agg_mode="token-mean", config=config(), rollout_is_weights=w)
    o, t, go, gt = _both(losses.sapo_loss, verl_fn, agg="seq-mean-token-mean")
    record("loss: SAPO (verl ignores loss_agg_mode)", o, t, go, gt)


def _verl(mode, agg="token-mean", **cfg):
    """verl's policy loss registered under ``mode``, as _both calls it, with an ActorConfig."""
    conf = config(**cfg)
    return lambda lp, old, adv, m, w: ca.get_policy_loss_fn(mode)(                  # noqa: E731
        old, lp, adv, m, loss_agg_mode=agg, config=conf, rollout_is_weights=w)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("mode", ["dppo_tv", "dppo_kl"])
def test_dppo_matches_verl(mode, agg):
    # delta 0.05 on the probability (TV) or 0.01 on the Bernoulli KL: both sides of the region bind
    delta = 0.05 if mode == "dppo_tv" else 0.01
    verl_fn = _verl(mode, agg, clip_ratio_low=delta, clip_ratio_high=delta, clip_ratio_c=3.0)
    ours_fn = losses.resolve_loss(mode)
    o, t, go, gt = _both(ours_fn, verl_fn, probabilities=True, delta_low=delta, delta_high=delta,
                         trunc=3.0, agg=agg)
    mask, old, logp, *_ = batch()
    keep = losses.dppo_keep(logp.clamp(max=-1e-3), old, batch()[-1][:, None].expand(B, T), mask,
                            mode[-2:], delta, delta)
    assert 0 < int(keep.sum()) < int(mask.sum())                   # the mask drops some tokens
    record(f"loss: {mode.upper().replace('_', '-')} (delta {delta}, trunc 3), {agg}, IS weight", o, t, go, gt)


def test_gmpo_matches_verls_geo_mean():
    # convention: verl's geo_mean ignores loss_agg_mode (a mean over the B rows; the batch has no
    # empty row) and weights by the geometric mean of the token IS weights (one per response here)
    o, t, go, gt = _both(losses.gmpo_loss, _verl("geo_mean", clip_ratio_low=0.1, clip_ratio_high=0.2),
                         "sequence", eps_low=0.1, eps_high=0.2)
    record("loss: GMPO = verl geo_mean (log-space clip 0.1, 0.2), sequence-level IS weight", o, t, go, gt)


def test_gpg_and_dro_match_verl():
    o, t, go, gt = _both(losses.gpg_loss, _verl("gpg"))
    record("loss: GPG (-A log pi), IS weight", o, t, go, gt)
    o, t, go, gt = _both(losses.dro_loss, _verl("dro", policy_loss={"dro_beta": 0.5}), beta=0.5)
    record("loss: DRO (beta 0.5), IS weight", o, t, go, gt)


@pytest.mark.parametrize("ratio, lb", [(2e-4, 0.3), (0.3, 0.05)], ids=["one token", "many tokens"])
def test_clip_cov_matches_verl_with_the_same_random_draw(ratio, lb):
    pl = {"clip_cov_ratio": ratio, "clip_cov_lb": lb, "clip_cov_ub": 5.0}
    o, t, go, gt = _both(losses.clip_cov_loss, _verl("clip_cov", policy_loss=pl), seed=7,
                         cov_ratio=ratio, cov_lb=lb, cov_ub=5.0)
    mask, old, logp, *_, adv = batch()
    torch.manual_seed(7)
    cov, _ = losses.clip_cov_loss(logp, old, adv, mask, cov_ratio=ratio, cov_lb=lb, cov_ub=5.0)
    plain, _ = losses.ppo_loss(logp, old, adv, mask)
    assert abs(float(cov) - float(plain)) > 1e-6                   # some token was detached
    record(f"loss: Clip-Cov (ratio {ratio:g}, bounds ({lb:g}, 5)), same torch seed, IS weight", o, t, go, gt)


@pytest.mark.parametrize("ratio", [2e-4, 0.1])
def test_kl_cov_matches_verl(ratio):
    pl = {"kl_cov_ratio": ratio, "ppo_kl_coef": 0.1}
    o, t, go, gt = _both(losses.kl_cov_loss, _verl("kl_cov", policy_loss=pl), kl_ratio=ratio, kl_coef=0.1)
    record(f"loss: KL-Cov (ratio {ratio:g}, coef 0.1), IS weight", o, t, go, gt)


@pytest.mark.parametrize("kind", ["ppo_clip", "reinforce", "reinforce without IS"])
def test_verls_bypass_mode_is_a_course_loss_with_the_samplers_logp_as_pi_old(kind):
    # bypass_mode reads old_log_prob as the sampler's log-probs: ppo_clip is the vanilla loss on the
    # ratio pi / pi_rollout (its IS weight ignored); reinforce is -sg(min(pi / pi_rollout, cap)) A log pi,
    # i.e. CISPO with no lower bound and eps_high = cap - 1, or GPG without an IS weight
    from verl.trainer.config.algorithm import RolloutCorrectionConfig
    rc_cfg = RolloutCorrectionConfig(loss_type=kind.split()[0], rollout_is=None if "without" in kind else "token",
                                     rollout_is_threshold=2.0, bypass_mode=True)
    verl_fn = _verl("bypass_mode", policy_loss={"rollout_correction": rc_cfg})
    if kind == "ppo_clip":
        o, t, go, gt = _both(losses.ppo_loss, verl_fn, None, dual_clip=3.0)
    elif kind == "reinforce":
        o, t, go, gt = _both(losses.cispo_loss, verl_fn, None, eps_low=None, eps_high=1.0)
    else:
        o, t, go, gt = _both(losses.gpg_loss, verl_fn, None)
    name = {"ppo_clip": "PPO, dual clip 3", "reinforce": "CISPO, eps_high = cap 2 - 1",
            "reinforce without IS": "GPG"}[kind]
    record(f"loss: verl bypass_mode {kind} = course {name}", o, t, go, gt)


# ---- train/inference corrections and the overlong penalty ------------------------------------
@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("kind", ["tis", "mis"])
def test_correction_weights_match_verls_rollout_correction(kind, level):
    mask, old, logp, *_ = batch(spread=0.5)
    rollout = logp                                                # any other log-probs will do
    # the threshold to_verl writes: a cap for TIS, IcePop's "lower_upper" for MIS with a lower bound
    # below any reachable weight (e^-20 after the clamp), which is course_lib's upper-only MIS
    threshold = 2.0 if kind == "tis" else f"{fw.MIS_LOWER:g}_2"
    theirs, _ = rc.compute_rollout_correction_weights(old - rollout, mask.double(), level, threshold)
    ours = corrections.correction_weights(kind, old, rollout, mask, 2.0, level)
    record(f"{kind.upper()} weights, {level} level", ours, theirs * mask)


def test_overlong_penalty_matches_verls_dapo_reward_manager():
    from verl import DataProto
    from verl.workers.reward_manager.dapo import DAPORewardManager
    max_len, cache = 16, 6
    lengths = torch.arange(1, max_len + 1)                         # every length up to the maximum
    n = len(lengths)
    prompts = torch.ones(n, 2, dtype=torch.long)
    responses = torch.ones(n, max_len, dtype=torch.long)
    attention = torch.cat([torch.ones(n, 2), (torch.arange(max_len)[None, :] < lengths[:, None]).float()], 1)
    data = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": attention.long()},
        non_tensors={"data_source": np.array(["toy"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": ""}] * n, dtype=object)})
    tokenizer = types.SimpleNamespace(decode=lambda ids, skip_special_tokens=True: "", eos_token="</s>")
    buffer = types.SimpleNamespace(enable=True, len=cache, penalty_factor=1.0, log=False)
    manager = DAPORewardManager(tokenizer, num_examine=0, compute_score=lambda **kw: 0.0,
                                max_resp_len=max_len, overlong_buffer_cfg=buffer)
    theirs = manager(data).sum(-1)                                   # reward on the last token: the penalty
    ours = rewards.overlong_penalty(lengths, max_len, cache)
    record("overlong penalty (lengths up to the maximum)", ours, theirs, atol=1e-6)


# ---- TRL 1.16.0: every loss_type, through GRPOTrainer._compute_loss -------------------------------
def trl_loss(logp, old, adv, mask, grad_accum=1, **grpo_kw):
    """TRL's own loss computation (GRPOTrainer._compute_loss, unchanged) on a prepared batch.

    The trainer object is a stand-in holding what _compute_loss reads: the GRPOConfig, the attributes
    GRPOTrainer.__init__ derives from it (epsilon_low/high, loss_type, ...), one process, and a model
    whose forward returns ``logp`` as the per-token log-probs (no entropy bonus, no vLLM, no KL)."""
    from collections import defaultdict

    from trl import GRPOConfig, GRPOTrainer
    from conftest import TRL_MACHINE
    args = GRPOConfig(**grpo_kw, **TRL_MACHINE)
    acc = types.SimpleNamespace(gather=lambda x: x, gather_for_metrics=lambda x: x, num_processes=1,
                                reduce=lambda x, reduction="sum": x, sync_gradients=True)
    trainer = types.SimpleNamespace(
        args=args, loss_type=args.loss_type, importance_sampling_level=args.importance_sampling_level,
        epsilon_low=args.epsilon, epsilon_high=args.epsilon if args.epsilon_high is None else args.epsilon_high,
        beta=args.beta, top_entropy_quantile=args.top_entropy_quantile,
        off_policy_mask_threshold=args.off_policy_mask_threshold, use_vllm=args.use_vllm,
        vllm_importance_sampling_correction=args.vllm_importance_sampling_correction,
        max_completion_length=args.max_completion_length, aux_loss_enabled=False,
        _entropy_bonus_enabled=False, current_gradient_accumulation_steps=grad_accum, accelerator=acc,
        model=types.SimpleNamespace(training=True), _metrics=defaultdict(lambda: defaultdict(list)),
        get_gamma_weights=GRPOTrainer.get_gamma_weights,
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, torch.zeros_like(logp), None))
    n = len(mask)
    inputs = {"prompt_ids": torch.ones(n, 1, dtype=torch.long), "prompt_mask": torch.ones(n, 1, dtype=torch.long),
              "completion_ids": torch.zeros(mask.shape, dtype=torch.long), "completion_mask": mask.long(),
              "advantages": adv, "old_per_token_logps": old, "num_items_in_batch": mask.sum()}
    assert not args.use_vllm and args.beta == 0
    return GRPOTrainer._compute_loss(trainer, None, inputs)


TRL_CASES = {   # name -> (GRPOConfig keywords, course loss, its keywords)
    "grpo": (dict(loss_type="grpo"), losses.grpo_loss, {}),
    "grpo, delta 3 (two-sided clip)": (dict(loss_type="grpo", delta=3.0), losses.grpo_loss, dict(dual_clip=3.0)),
    "grpo, importance_sampling_level sequence (GSPO)":
        (dict(loss_type="grpo", importance_sampling_level="sequence", epsilon=0.05, epsilon_high=0.08),
         losses.gspo_loss, dict(eps_low=0.05, eps_high=0.08)),
    "bnpo (one micro-batch)": (dict(loss_type="bnpo"), losses.ppo_loss, {}),
    "dr_grpo, max_completion_length 16": (dict(loss_type="dr_grpo", max_completion_length=16),
                                          losses.dr_grpo_loss, dict(max_len=16)),
    "dapo, epsilon_high 0.28": (dict(loss_type="dapo", epsilon_high=0.28), losses.dapo_loss, {}),
    "luspo, importance_sampling_level sequence":
        (dict(loss_type="luspo", importance_sampling_level="sequence", epsilon=0.05, epsilon_high=0.08),
         losses.luspo_loss, dict(eps_low=0.05, eps_high=0.08)),
    # convention: TRL's epsilon_high is CISPO's absolute cap; course_lib's is a distance from 1
    "cispo, epsilon_high 5 (= course eps_high 4, no lower bound)":
        (dict(loss_type="cispo", epsilon_high=5.0), losses.cispo_loss, dict(eps_low=None, eps_high=4.0)),
    "cispo, epsilon_high 1.2 (= course eps_high 0.2)":
        (dict(loss_type="cispo", epsilon_high=1.2), losses.cispo_loss, dict(eps_low=None, eps_high=0.2)),
    "sapo": (dict(loss_type="sapo"), losses.sapo_loss, {}),
    # TRL builds SAPO's temperatures with torch.where from Python floats: a float32 tensor, so 1.05 is
    # 1.0499999523; with temperatures exact in float32 the two agree to float64's precision
    "sapo, temperatures 1 and 1.25": (dict(loss_type="sapo", sapo_temperature_neg=1.25), losses.sapo_loss,
                                      dict(tau_neg=1.25)),
    "vespo": (dict(loss_type="vespo"), losses.vespo_loss, {}),
}


@pytest.mark.parametrize("name", list(TRL_CASES))
def test_trl_loss_types_match_course_lib_values_and_gradients(name):
    grpo_kw, ours_fn, ours_kw = TRL_CASES[name]
    mask, old, logp, *_, adv = batch()
    x1 = logp.clone().requires_grad_(True)
    x2 = logp.clone().requires_grad_(True)
    ours, _ = ours_fn(x1, old, adv, mask, **ours_kw)
    theirs = trl_loss(x2, old, adv, mask, **grpo_kw)
    ours.backward()
    theirs.backward()
    name = name + (" (TRL's temperature 1.05 in float32)" if name == "sapo" else "")
    record(f"TRL loss_type={name}", ours, theirs, x1.grad * mask, x2.grad * mask,
           atol=1e-7 if name.startswith("sapo (") else 1e-8)


def test_trl_bnpo_normalises_each_micro_batch_by_its_own_tokens():
    # two micro-batches of gradient accumulation: TRL's "bnpo" is the mean of the two halves'
    # token-means (frameworks.NORMALISERS: scope "micro-batch"), not the token-mean of the whole
    mask, old, logp, *_, adv = batch()
    x1 = logp.clone().requires_grad_(True)
    x2 = logp.clone().requires_grad_(True)
    h = B // 2
    ours = sum(losses.ppo_loss(x1[i:i + h], old[i:i + h], adv[i:i + h], mask[i:i + h])[0] for i in (0, h)) / 2
    theirs = sum(trl_loss(x2[i:i + h], old[i:i + h], adv[i:i + h], mask[i:i + h], grad_accum=2, loss_type="bnpo")
                 for i in (0, h))
    ours.backward()
    theirs.backward()
    whole, _ = losses.ppo_loss(logp, old, adv, mask)
    assert abs(float(theirs - whole)) > 1e-4                     # the halves' token counts differ
    record("TRL loss_type=bnpo, 2 micro-batches (mean of their token-means)", ours, theirs,
           x1.grad * mask, x2.grad * mask)
