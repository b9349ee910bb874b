"""course_lib against verl 0.9.1's own functions: values and gradients on random padded batches.

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
        import verl
        with open(os.path.join(path, "verl_agreement.json"), "w") as f:
            json.dump({"verl": verl.__version__, "torch": torch.__version__, "checks": RESULTS}, f, indent=1)


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


def config(**kw):
    """A verl ActorConfig holding only the fields its losses read (the rest of it needs a cluster)."""
    from verl.workers.config import ActorConfig
    fields = {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0,
              "tau_pos": 1.0, "tau_neg": 1.05, "global_batch_info": {}}
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


# ---- aggregation and KL ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                  "seq-mean-token-sum-norm"])
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
def _both(our_fn, verl_fn, weight_level="token", **our_kw):
    """Run our loss and verl's on the same batch with a random IS weight (one per token, or one per
    response); return values and d loss / d logp."""
    mask, old, logp, _, _, adv = batch()
    shape = (B, T) if weight_level == "token" else (B, 1)
    w = torch.rand(*shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 2 * mask
    x1 = logp.clone().requires_grad_(True)
    x2 = logp.clone().requires_grad_(True)
    ours, _ = our_fn(x1, old, adv, mask, is_weight=w, **our_kw)
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
