"""Chapter 12's measurements on a real model's tokens: the train/inference mismatch, one real
policy-gradient step (ratios, clipping, GSPO's sequence ratio), the KL estimators against the exact KL
over the whole vocabulary, and per-token entropy. Each takes a ``course_lib.lm.ChatLM`` and its samples
and returns plain numbers, so the chapter, the stored runs (benchmarks/real_lm_tokens.py) and the tests
compute them the same way.

The task (``lm.task``): single-digit addition asked in chat form, rewarded by the last integer of the reply
(the only measured candidate whose sampled pass@1 at temperature 1 lies between 10% and 60%)."""
from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass

import torch
from torch import Tensor

from .. import kl as kl_lib
from ..advantages import group_advantages
from ..masking import masked_mean
from ..ratios import clip_stats
from ..sim.kl import estimator_gradients, framework_kl_gradients, relative_gap
from .model import ChatLM, Replies
from .task import SYSTEM, Questions, addition_questions, last_integer  # noqa: F401 (chapter 12 reads them here)

TIS_CAP = 2.0                           # verl's Token-TIS / Seq-TIS presets
SEQ_MIS_BOUNDS = (0.5, 2.0)             # verl's Seq-MIS preset: seq_sum_k1 "0.5_2.0"
GEO_RS_BOUNDS = (0.999, 1.001)          # verl's Geo-RS preset: seq_mean_k1 "0.999_1.001"
FORKING_THRESHOLD = 0.672               # nats: the 80th percentile of token entropy in arXiv 2506.01939


# ------------------------------------------------------------------------------------------- ratios

def ratio_table(logp: Tensor, ref_logp: Tensor, mask: Tensor) -> dict:
    """The per-token ratio r = exp(logp - ref_logp) over valid tokens, and the sequence-level product
    and geometric mean per response: quantiles, the shares beyond TIS's cap and outside verl's Seq-MIS
    and Geo-RS bounds, and the median over responses of |mean log-ratio per token| (what a reply's
    length multiplies). All [B, T] with a bool mask."""
    log_r = torch.where(mask, logp - ref_logp, 0.0).double()
    tok = log_r[mask].exp()
    q = torch.quantile(tok, torch.tensor([0.01, 0.05, 0.5, 0.95, 0.99], dtype=torch.float64)).tolist()
    seq_log = log_r.sum(1)
    n = mask.sum(1).clamp(min=1)
    prod, geo = seq_log.exp(), (seq_log / n).exp()
    outside = lambda x, lo, hi: float(((x < lo) | (x > hi)).double().mean())   # noqa: E731
    return {"n_tokens": int(mask.sum()), "n_seqs": int(mask.shape[0]),
            "q01": q[0], "q05": q[1], "q50": q[2], "q95": q[3], "q99": q[4],
            "min": float(tok.min()), "max": float(tok.max()),
            "max_abs_dlogp": float(log_r.abs().max()), "mean_abs_dlogp": float(log_r[mask].abs().mean()),
            "tok_outside_10pct": outside(tok, 0.9, 1 / 0.9),
            "tok_beyond_tis_cap": float((tok > TIS_CAP).double().mean()),
            "seq_prod_min": float(prod.min()), "seq_prod_max": float(prod.max()),
            "seq_outside_mis": outside(prod, *SEQ_MIS_BOUNDS),
            "seq_geo_min": float(geo.min()), "seq_geo_max": float(geo.max()),
            "seq_geo_outside_rs": outside(geo, *GEO_RS_BOUNDS),
            "seq_mean_abs_log_median": float((seq_log / n).abs().median())}


# ------------------------------------------------------------------------------------------- one step

def reinforce_gradients(model: ChatLM, rollout: Replies, adv: Tensor, *, micro_batch: int = 8) -> dict:
    """Gradients of the token-mean REINFORCE loss -A log pi (one GRPO step with pi = pi_old, where every
    ratio is 1 and no clip binds), accumulated over micro-batches; {parameter name: grad}."""
    params = dict(model.model.named_parameters())
    model.model.zero_grad(set_to_none=True)
    n_tok = rollout.mask.sum().clamp(min=1)
    for i in range(0, len(rollout.prompts), micro_batch):
        part = rollout.rows(slice(i, i + micro_batch))
        logp, _ = model.score(part.prompts, part.response, part.lengths, temperature=rollout.temperature)
        loss = -(adv[i:i + micro_batch, None] * torch.where(part.mask, logp, 0.0)).sum() / n_tok
        loss.backward()
    grads = {k: p.grad.detach().clone() for k, p in params.items() if p.grad is not None}
    model.model.zero_grad(set_to_none=True)
    return grads


def stepped(model: ChatLM, grads: dict, lr: float) -> ChatLM:
    """A copy of the model after one AdamW step (betas 0.9/0.999, no weight decay) with these gradients.
    On a first step Adam moves each weight by about lr * sign(grad), whatever the gradient's size.

    Only ``model.model``'s parameters are copied and stepped. The tied head is the embedding matrix, so
    it steps with the body. A separate head (``lm.load(..., head_dtype=...)`` unlike the body) is no
    parameter of ``model.model``: ``reinforce_gradients`` gives it no gradient, and the copy shares it
    with the source, unchanged."""
    new = copy.copy(model)
    new.model = copy.deepcopy(model.model)
    params = dict(new.model.named_parameters())
    for k, g in grads.items():
        params[k].grad = g.clone()
    opt = torch.optim.AdamW([params[k] for k in grads], lr=lr, weight_decay=0.0)
    opt.step()
    new.model.zero_grad(set_to_none=True)
    return new


def step_report(old_logp: Tensor, new_logp: Tensor, adv: Tensor, mask: Tensor,
                texts: list[list[str]], p_old: Tensor | None = None) -> dict:
    """After one step, the ratio's spread and what each clip would remove. [B, T]; adv [B].

    "live" = the replies with a nonzero advantage, the only ones with a gradient. On their
    tokens: PPO's binding clip at eps 0.2 and at Clip-Higher's (0.2, 0.28) (``clip_stats``), and
    the tokens of the replies GSPO clips at its paper's (3e-4, 4e-4) on the sequence ratio (the
    geometric mean). ``clip_frac_*`` count over all tokens instead, as verl's pg_clipfrac does."""
    log_r = torch.where(mask, new_logp - old_logp, 0.0)                       # [B, T]
    ratio = torch.exp(log_r)
    adv_tok = adv[:, None].expand_as(ratio)
    some = mask.any(1)                                                        # [B]
    live = some & (adv != 0)                                                  # [B]
    live_tok = mask & live[:, None]                                           # [B, T]
    n_live_tok = live_tok.sum().clamp(min=1)
    seq = torch.exp(log_r.sum(1) / mask.sum(1).clamp(min=1))                  # [B]
    low, high = seq < 1 - 3e-4, seq > 1 + 4e-4
    gspo = live & ((low & (adv < 0)) | (high & (adv > 0)))                    # [B]
    report = {"ratio": ratio_table(new_logp, old_logp, mask),
              "n_replies": int(some.sum()), "n_tokens": int(mask.sum()),
              "n_live_replies": int(live.sum()), "n_live_tokens": int(live_tok.sum())}
    for eps in (0.2, 0.28):
        for key, where in ((f"clip_frac_{eps:g}", mask), (f"clip_frac_{eps:g}_live", live_tok)):
            c = clip_stats(ratio, adv_tok, where, 0.2, eps)
            report[key] = c["clip/low_frac"] + c["clip/high_frac"]
    report |= {
        "gspo_seq_clipped": int(gspo.sum()),
        "gspo_seq_clip_frac": float(gspo.sum() / live.sum().clamp(min=1)),
        "gspo_tok_clip_frac_live": float((mask & gspo[:, None]).sum() / n_live_tok),
        "gspo_seq_outside_frac": float((some & (low | high)).sum() / some.sum().clamp(min=1)),
        "seq_ratio_min": float(seq[some].min()), "seq_ratio_max": float(seq[some].max())}
    out_tok = mask & ((ratio < 0.8) | (ratio > 1.28))
    counts = Counter(texts[b][t] for b, t in out_tok.nonzero().tolist())
    report["top_outside_tokens"] = counts.most_common(8)
    if p_old is not None:
        report["p_old_outside"] = float(p_old[out_tok].mean()) if out_tok.any() else float("nan")
        report["p_old_all"] = float(p_old[mask].mean())
    return report


# ------------------------------------------------------------------------------------------- KL

def kl_estimates(logp: Tensor, ref_logp: Tensor, exact_tok: Tensor, mask: Tensor) -> dict:
    """k1, k2, k3 of KL(pi || pi_ref) per token and per response against the exact KL (summed over the
    whole vocabulary at each position), on tokens sampled from pi. [B, T]; exact_tok [B, T]."""
    out = {"exact_tok": float(masked_mean(exact_tok, mask)),
           "exact_seq": float(torch.where(mask, exact_tok, 0.0).sum(1).mean())}
    for kind in ("k1", "k2", "k3"):
        k = kl_lib.kl_estimate(logp, ref_logp, mask, kind)
        vals = k[mask].double()
        seq = torch.where(mask, k, 0.0).sum(1).double()
        out[kind] = {"mean_tok": float(vals.mean()), "std_tok": float(vals.std()),
                     "se_tok": float(vals.std() / math.sqrt(vals.numel())),
                     "mean_seq": float(seq.mean()), "std_seq": float(seq.std())}
    return out


@torch.no_grad()
def exact_kl_tokens(policy: ChatLM, ref: ChatLM, rollout: Replies, *, micro_batch: int = 8):
    """At every response position: exact KL(pi || pi_ref) over the vocabulary [B, T], and both models'
    log-probs of the sampled tokens [B, T] (at the rollout's temperature)."""
    kls, lps, refs = [], [], []
    for i in range(0, len(rollout.prompts), micro_batch):
        part = rollout.rows(slice(i, i + micro_batch))
        a = torch.log_softmax(policy.response_logits(part.prompts, part.response, part.lengths)
                              / rollout.temperature, -1)
        b = torch.log_softmax(ref.response_logits(part.prompts, part.response, part.lengths)
                              / rollout.temperature, -1)
        m = part.mask
        kls.append(torch.where(m, kl_lib.categorical_kl(a, b), 0.0))
        ids = part.response[..., None]
        lps.append(torch.where(m, a.gather(-1, ids).squeeze(-1), 0.0))
        refs.append(torch.where(m, b.gather(-1, ids).squeeze(-1), 0.0))
    return torch.cat(kls), torch.cat(lps), torch.cat(refs)


@torch.no_grad()
def gradient_check(policy: ChatLM, ref: ChatLM, rollout: Replies, n_positions: int = 64) -> dict:
    """At the first n response positions of the rollout, the expected gradient of each estimator used as
    a loss (exact over the vocabulary, ``sim.kl.estimator_gradients``), and of verl's "k3+" and TRL's
    k3 x ratio (``sim.kl.framework_kl_gradients``), against the gradients of the reverse
    KL(pi || pi_ref) and the forward KL(pi_ref || pi): relative gaps |g - target| / |target|."""
    part = rollout.rows(slice(0, 4))
    m = part.mask
    z = policy.response_logits(part.prompts, part.response, part.lengths)[m][:n_positions].double()
    z_ref = ref.response_logits(part.prompts, part.response, part.lengths)[m][:n_positions].double()
    logits, ref_logp = z / rollout.temperature, torch.log_softmax(z_ref / rollout.temperature, -1)
    with torch.enable_grad():
        g = estimator_gradients(logits, ref_logp) | framework_kl_gradients(logits, ref_logp)
    kinds = ("k1", "k2", "k3", "k1 in reward", "k3+", "k3 x ratio")
    return {k: {"vs_reverse": relative_gap(g[k], g["reverse"]),
                "vs_forward": relative_gap(g[k], g["forward"]),
                "norm_ratio": float(g[k].norm() / g["reverse"].norm())} for k in kinds} | {
        "n_positions": int(z.shape[0])}


# ------------------------------------------------------------------------------------------- entropy

def entropy_shares(model: ChatLM, rollout: Replies, temperatures=(0.3, 0.5, 0.7, 1.0), *,
                   micro_batch: int = 8) -> dict:
    """The share of response tokens whose entropy exceeds 0.672 nats, the mean and median entropy, and
    the number of tokens, of the tempered distribution at each temperature, at the positions of the given
    rollout (whatever temperature it was sampled at: ``sampled_entropy_shares`` samples at each)."""
    ents = {t: [] for t in temperatures}
    with torch.no_grad():
        for i in range(0, len(rollout.prompts), micro_batch):
            part = rollout.rows(slice(i, i + micro_batch))
            logits = model.response_logits(part.prompts, part.response, part.lengths)
            for t in temperatures:
                lp = torch.log_softmax(logits / t, -1)
                ents[t].append(-(lp.exp() * lp).sum(-1)[part.mask])
    out = {}
    for t, parts in ents.items():
        e = torch.cat(parts).double()
        out[t] = {"share_above": float((e > FORKING_THRESHOLD).double().mean()),
                  "mean": float(e.mean()), "median": float(e.median()), "n_tokens": int(e.numel())}
    return out


def sampled_entropy_shares(model: ChatLM, questions: Questions, seed: int,
                           temperatures=(0.3, 0.5, 0.7, 1.0), *, max_new_tokens: int = 40) -> dict:
    """``entropy_shares`` at each temperature T on replies sampled at T (one per prompt of
    ``questions``, seeded): the model's own contexts at that temperature, where re-tempering the
    positions of T = 1 replies measures other text. Each entry also counts its replies."""
    out = {}
    for t in temperatures:
        roll = model.sample(questions.prompts(model), max_new_tokens=max_new_tokens, temperature=t, seed=seed)
        out[t] = entropy_shares(model, roll, (t,))[t] | {"n_replies": len(roll.prompts)}
    return out


# ------------------------------------------------------------------------------------------- a whole run

LRS = (1e-6, 1e-5, 1e-4)
SIZE = {"n_prompts": 8, "group_size": 4, "max_new_tokens": 40, "temperature": 1.0}


@dataclass
class ScoredReplies:
    """Chapter 12's measured replies: the questions, the replies (fp32 sampler), the token texts, rewards and
    GRPO advantages, and the fp32 re-forward's log-probs and entropies [B, T]. (The trainer learns from an
    ``rl.rollout.Batch``.)"""
    questions: Questions
    rollout: Replies
    texts: list[list[str]]
    rewards: Tensor
    adv: Tensor
    logp: Tensor
    entropy: Tensor


def sample_batch(model: ChatLM, seed: int, *, n_prompts: int = 8, group_size: int = 4,
                 max_new_tokens: int = 40, temperature: float = 1.0) -> ScoredReplies:
    """Sample G replies to each of P addition questions (seeded), grade them, and re-score them in a
    full forward (log-probs and entropies at the sampling temperature)."""
    q = addition_questions(n_prompts, group_size, seed)
    roll = model.sample(q.prompts(model), max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    rewards = q.rewards(model.responses_text(roll))
    with torch.no_grad():
        logp, ent = model.score(roll.prompts, roll.response, roll.lengths, temperature=temperature,
                                entropy=True, micro_batch=8)
    texts = [model.token_texts(r[:n]) for r, n in zip(roll.response.tolist(), roll.lengths.tolist())]
    return ScoredReplies(q, roll, texts, rewards, group_advantages(rewards, group_size), logp, ent)


def precision_report(batch: ScoredReplies, models: dict[str, ChatLM], rows: int | None = None,
                     alone_rows: int = 4) -> dict:
    """(a) The fp32 sampler against its own full re-forward, and each other precision's re-forward
    against fp32's on the same tokens (the first ``rows`` replies); plus, per precision, one reply alone
    against inside the padded batch (the first ``alone_rows``). ``models`` maps a label to a model."""
    roll = batch.rollout.rows(slice(0, rows))
    mask, ref = roll.mask, batch.logp[:len(roll.prompts)]
    out = {"fp32 sampler vs fp32 re-forward": ratio_table(batch.rollout.logp, batch.logp, batch.rollout.mask)}
    for label, m in models.items():
        with torch.no_grad():
            lp, _ = m.score(roll.prompts, roll.response, roll.lengths, temperature=roll.temperature,
                            micro_batch=8)
            out[f"{label} re-forward vs fp32"] = ratio_table(lp, ref, mask)
            alone = [m.score(*_row(roll, b), temperature=roll.temperature)[0][0] for b in range(alone_rows)]
        if alone:
            gap = max(float((lp[b] - a).abs()[mask[b]].max()) for b, a in enumerate(alone))
            out[f"{label} alone vs padded batch"] = {"max_abs_dlogp": gap}
    return out


def _row(roll: Replies, b: int):
    one = roll.rows([b])
    return one.prompts, one.response, one.lengths


def step_reports(model: ChatLM, batch: ScoredReplies, lrs=LRS) -> tuple[dict, dict]:
    """(c) One AdamW step of the REINFORCE loss per learning rate, from the same gradients; for each,
    ``step_report`` on the training tokens. Returns (reports by lr, stepped models by lr)."""
    roll = batch.rollout
    grads = reinforce_gradients(model, roll, batch.adv)
    reports, models = {}, {}
    for lr in lrs:
        new = stepped(model, grads, lr)
        with torch.no_grad():
            new_logp, _ = new.score(roll.prompts, roll.response, roll.lengths, temperature=roll.temperature,
                                    micro_batch=8)
        reports[lr] = step_report(batch.logp, new_logp, batch.adv, roll.mask, batch.texts,
                                  p_old=batch.logp.exp())
        reports[lr]["new_logp"] = new_logp
        models[lr] = new
    return reports, models


def held_back_step_reports(model: ChatLM, batch: ScoredReplies, lrs=LRS) -> dict:
    """GSPO's setting: a batch learned in mini-batches, where each update's clip sees replies the
    previous update did not train on. The batch's groups split in two halves; one AdamW step on each
    half's REINFORCE gradient, and the other half's ratios after it. ``step_report`` over all replies,
    each scored by the model stepped on the half it is not in. Returns reports by lr."""
    roll, G = batch.rollout, batch.questions.group_size
    half = (len(roll.prompts) // G // 2) * G                         # whole groups in the first half
    if not 0 < half < len(roll.prompts):
        raise ValueError(f"{len(roll.prompts) // G} groups cannot be split in two halves")
    halves = (list(range(half)), list(range(half, len(roll.prompts))))
    new_logp = {lr: torch.zeros_like(batch.logp) for lr in lrs}    # [B, T]
    for trained, held in (halves, halves[::-1]):
        grads = reinforce_gradients(model, roll.rows(trained), batch.adv[trained])
        part = roll.rows(held)
        for lr in lrs:
            new = stepped(model, grads, lr)
            with torch.no_grad():
                lp, _ = new.score(part.prompts, part.response, part.lengths, temperature=roll.temperature,
                                  micro_batch=8)
            new_logp[lr][held] = lp
            del new
    return {lr: step_report(batch.logp, new_logp[lr], batch.adv, roll.mask, batch.texts,
                            p_old=batch.logp.exp()) for lr in lrs}


def kl_report(new: ChatLM, old: ChatLM, batch: ScoredReplies, fresh_seed: int,
              max_new_tokens: int = SIZE["max_new_tokens"]) -> dict:
    """(b) KL(pi_new || pi_old) after one step, pi_old the model before it: k1, k2, k3 on fresh replies
    sampled from pi_new to the same prompts, against the exact KL at those positions; the same on the
    training batch (sampled from pi_old before the step); and the estimators' gradients as losses."""
    roll = batch.rollout
    fresh = new.sample(roll.prompts, max_new_tokens=max_new_tokens, temperature=roll.temperature,
                       seed=fresh_seed)
    exact, lp, ref = exact_kl_tokens(new, old, fresh)
    exact_t, lp_t, ref_t = exact_kl_tokens(new, old, roll)
    return {"fresh": kl_estimates(lp, ref, exact, fresh.mask),
            "training batch": kl_estimates(lp_t, ref_t, exact_t, roll.mask),
            "gradients": gradient_check(new, old, fresh)}


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items() if not isinstance(v, Tensor)}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


PRECISION_ROWS = 16                     # the first 16 replies: bf16 on a CPU without bf16 units is slow


def summary(batch: ScoredReplies, precision: dict, steps: dict, kl: dict, entropy: dict,
            held_back: dict | None = None, entropy_sampled: dict | None = None) -> dict:
    """One seed's measurements as JSON-able numbers (what benchmarks/real_lm_tokens.py stores)."""
    roll = batch.rollout
    out = {"pass@1": float(batch.rewards.mean()), "mean_length": float(roll.lengths.double().mean()),
           "truncated": float(roll.truncated.double().mean()), "precision": precision,
           "step": {f"{lr:g}": r for lr, r in steps.items()}, "kl": kl,
           "entropy": {f"{t:g}": v for t, v in entropy.items()}}
    if held_back is not None:
        out["step_held_back"] = {f"{lr:g}": r for lr, r in held_back.items()}
    if entropy_sampled is not None:
        out["entropy_sampled"] = {f"{t:g}": v for t, v in entropy_sampled.items()}
    return _jsonable(out)


def measure(model: ChatLM, seed: int, models: dict[str, ChatLM], *, lrs=LRS, kl_lr: float = 1e-5,
            progress=None) -> dict:
    """Every measurement of the chapter for one seed, in the chapter's order and sizes."""
    tick = progress or (lambda _label: None)
    batch = sample_batch(model, seed, **SIZE)
    tick("sampled")
    precision = precision_report(batch, models, rows=PRECISION_ROWS)
    tick("precision")
    steps, stepped_models = step_reports(model, batch, lrs)
    tick("steps")
    kl = kl_report(stepped_models[kl_lr], model, batch, fresh_seed=1000 + seed)
    tick("kl")
    del stepped_models
    held_back = held_back_step_reports(model, batch, lrs)
    tick("held-back half")
    entropy = entropy_shares(model, batch.rollout.rows(slice(0, PRECISION_ROWS)))
    entropy_sampled = sampled_entropy_shares(model, batch.questions, seed,
                                             max_new_tokens=SIZE["max_new_tokens"])
    tick("entropy")
    return {"seed": seed, "size": dict(SIZE),
            **summary(batch, precision, steps, kl, entropy, held_back, entropy_sampled)}


def across_seeds(stored: dict, *path: str) -> list:
    """One stored number for every seed, in seed order: across_seeds(data, "kl", "fresh", "exact_tok")."""
    out = []
    for seed in sorted(stored["seeds"], key=int):
        node = stored["seeds"][seed]
        for key in path:
            node = node[key]
        out.append(node)
    return out
