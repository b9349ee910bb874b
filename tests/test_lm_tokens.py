"""Chapter 12's measurements (course_lib.lm.tokens) against slow loops on small made-up tensors: the ratio
table, one step's clip statistics and GSPO's sequence clip, the KL estimates, the verifier, the
token panel. The real model itself is tested in test_lm.py; the chapter re-checks the stored seed 0 live."""
import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch

from course_lib.lm import tokens

ROOT = Path(__file__).resolve().parents[1]


def _batch(seed=0, B=6, T=7):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None] < lengths[:, None]
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    new = old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    return old, new, mask


def test_ratio_table_matches_a_loop_over_tokens_and_replies():
    old, new, mask = _batch()
    new[0, 0] = old[0, 0] + math.log(2.5)                   # one token beyond the TIS cap
    t = tokens.ratio_table(new, old, mask)
    toks = [math.exp(new[b, i] - old[b, i]) for b in range(6) for i in range(7) if mask[b, i]]
    assert t["n_tokens"] == len(toks) and t["max"] == pytest.approx(max(toks))
    assert t["tok_beyond_tis_cap"] == pytest.approx(sum(r > 2 for r in toks) / len(toks))
    assert t["tok_outside_10pct"] == pytest.approx(sum(r < 0.9 or r > 1 / 0.9 for r in toks) / len(toks))
    prods, geos = [], []
    for b in range(6):
        logs = [float(new[b, i] - old[b, i]) for i in range(7) if mask[b, i]]
        prods.append(math.exp(sum(logs)))
        geos.append(math.exp(sum(logs) / len(logs)))
    assert t["seq_prod_max"] == pytest.approx(max(prods)) and t["seq_geo_min"] == pytest.approx(min(geos))
    assert t["seq_outside_mis"] == pytest.approx(sum(p < 0.5 or p > 2 for p in prods) / 6)
    assert t["seq_geo_outside_rs"] == pytest.approx(sum(g < 0.999 or g > 1.001 for g in geos) / 6)


def test_step_report_counts_binding_clips_and_gspo_replies_like_a_loop():
    old, new, mask = _batch(1)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.0, 1.0], dtype=torch.float64)
    # replies whose sequence ratio sits between GSPO's two bounds: a swapped low/high range shows here
    for b, s in ((0, 1 + 3.5e-4), (1, 1 - 2e-4), (2, 1 + 4.5e-4), (3, 1 - 5e-4)):
        new[b] = torch.where(mask[b], old[b] + math.log(s), new[b])
    new[4] = torch.where(mask[4], old[4] + 1.0, new[4])       # a reply without advantage, far outside
    texts = [[f"t{b}{i}" for i in range(7)] for b in range(6)]
    r = tokens.step_report(old, new, adv, mask, texts)
    n = int(mask.sum())
    live_rows = [b for b in range(6) if adv[b] != 0]
    n_live = sum(int(mask[b].sum()) for b in live_rows)
    assert (r["n_tokens"], r["n_replies"], r["n_live_replies"], r["n_live_tokens"]) == (n, 6, 5, n_live)
    for eps_high, key in ((0.2, "clip_frac_0.2"), (0.28, "clip_frac_0.28")):
        binds = sum(1 for b in range(6) for i in range(7) if mask[b, i] and (
            (adv[b] > 0 and math.exp(new[b, i] - old[b, i]) > 1 + eps_high) or
            (adv[b] < 0 and math.exp(new[b, i] - old[b, i]) < 0.8)))
        assert r[key] == pytest.approx(binds / n), key
        assert r[key + "_live"] == pytest.approx(binds / n_live), key    # the same clips, the live base
    clipped, clipped_tok = 0, 0
    for b in live_rows:
        logs = [float(new[b, i] - old[b, i]) for i in range(7) if mask[b, i]]
        s = math.exp(sum(logs) / len(logs))
        if (adv[b] > 0 and s > 1 + 4e-4) or (adv[b] < 0 and s < 1 - 3e-4):
            clipped, clipped_tok = clipped + 1, clipped_tok + len(logs)
    assert r["gspo_seq_clipped"] == clipped
    assert r["gspo_seq_clip_frac"] == pytest.approx(clipped / len(live_rows))
    assert r["gspo_tok_clip_frac_live"] == pytest.approx(clipped_tok / n_live)
    outside = [texts[b][i] for b in range(6) for i in range(7)
               if mask[b, i] and not 0.8 <= math.exp(new[b, i] - old[b, i]) <= 1.28]
    assert r["top_outside_tokens"] == Counter(outside).most_common(8)


def _tiny_chat(separate_head=False):
    """A one-layer Llama with 24 tokens, random weights, in ``lm.ChatLM`` (EOS = pad = 2)."""
    from types import SimpleNamespace

    from transformers import LlamaConfig, LlamaForCausalLM

    from course_lib.lm import ChatLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=24, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True)
    m = LlamaForCausalLM(cfg).eval()
    head = m.get_output_embeddings().weight.detach().clone() if separate_head else None
    return ChatLM(m, SimpleNamespace(eos_token_id=2, pad_token_id=2), "fp32", "fp32", head)


def _tiny_batch(chat, n_prompts=4, G=2):
    prompts = [[5 + p, 6, 7 + p][: 2 + p % 2] for p in range(n_prompts) for _ in range(G)]
    roll = chat.sample(prompts, max_new_tokens=6, temperature=1.0, seed=0)
    with torch.no_grad():
        logp, ent = chat.score(roll.prompts, roll.response, roll.lengths, entropy=True)
    texts = [[str(t) for t in r[:n]] for r, n in zip(roll.response.tolist(), roll.lengths.tolist())]
    rewards = torch.tensor([float(b % 3 == 0) for b in range(len(prompts))])
    adv = torch.tensor([1.0, -1.0] * (len(prompts) // 2))
    q = tokens.Questions([f"q{p}" for p in range(n_prompts)], list(range(n_prompts)), G)
    return tokens.ScoredReplies(q, roll, texts, rewards, adv, logp, ent)


def test_the_held_back_half_is_scored_by_the_model_stepped_on_the_other_half():
    chat = _tiny_chat()
    batch = _tiny_batch(chat)
    lr = 1e-2
    got = tokens.held_back_step_reports(chat, batch, (lr,))[lr]
    expect = torch.zeros_like(batch.logp)
    for trained, held in (([0, 1, 2, 3], [4, 5, 6, 7]), ([4, 5, 6, 7], [0, 1, 2, 3])):
        grads = tokens.reinforce_gradients(chat, batch.rollout.rows(trained), batch.adv[trained])
        part, new = batch.rollout.rows(held), tokens.stepped(chat, grads, lr)
        with torch.no_grad():
            expect[held] = new.score(part.prompts, part.response, part.lengths)[0]
    want = tokens.step_report(batch.logp, expect, batch.adv, batch.rollout.mask, batch.texts)
    assert got["ratio"]["q50"] != 1.0 and got["n_live_replies"] == 8
    for key in ("q01", "q50", "q99", "max_abs_dlogp"):
        assert got["ratio"][key] == pytest.approx(want["ratio"][key], rel=1e-5, abs=1e-7), key
    # stepping on the whole batch moves its own tokens otherwise
    grads = tokens.reinforce_gradients(chat, batch.rollout, batch.adv)
    with torch.no_grad():
        own = tokens.stepped(chat, grads, lr).score(batch.rollout.prompts, batch.rollout.response,
                                                    batch.rollout.lengths)[0]
    assert (own - expect)[batch.rollout.mask].abs().max() > 1e-4


def test_stepped_moves_a_tied_head_and_keeps_a_separate_one_unchanged():
    for separate in (False, True):
        chat = _tiny_chat(separate_head=separate)
        batch = _tiny_batch(chat)
        before = chat.head.detach().clone()
        new = tokens.stepped(chat, tokens.reinforce_gradients(chat, batch.rollout, batch.adv), 1e-2)
        assert torch.equal(chat.head, before)                            # the source is untouched
        if separate:
            assert new.separate_head is chat.separate_head and torch.equal(new.head, before)
        else:
            assert new.separate_head is None and not torch.equal(new.head, before)


def test_sampled_entropy_samples_at_each_temperature_and_counts_its_tokens():
    from types import SimpleNamespace
    chat = _tiny_chat()
    prompts = [[5, 6], [5, 6], [9, 7, 8], [9, 7, 8]]
    q = SimpleNamespace(prompts=lambda model: prompts)
    got = tokens.sampled_entropy_shares(chat, q, seed=3, temperatures=(0.3, 1.0), max_new_tokens=6)
    for t in (0.3, 1.0):
        roll = chat.sample(prompts, max_new_tokens=6, temperature=t, seed=3)
        want = tokens.entropy_shares(chat, roll, (t,))[t]
        assert got[t]["n_tokens"] == int(roll.mask.sum()) and got[t]["n_replies"] == 4
        assert got[t]["mean"] == pytest.approx(want["mean"]) and got[t]["share_above"] == want["share_above"]
    retempered = tokens.entropy_shares(chat, chat.sample(prompts, max_new_tokens=6, seed=3), (0.3,))[0.3]
    assert got[0.3]["mean"] != pytest.approx(retempered["mean"])       # other positions, other entropy


def test_kl_estimates_match_the_formulas_and_their_spread():
    old, new, mask = _batch(2)
    exact = torch.rand(6, 7, dtype=torch.float64)
    r = tokens.kl_estimates(new, old, exact, mask)
    lr = [float(old[b, i] - new[b, i]) for b in range(6) for i in range(7) if mask[b, i]]   # log(ref / pi)
    forms = {"k1": lambda x: -x, "k2": lambda x: 0.5 * x * x, "k3": lambda x: math.exp(x) - 1 - x}
    for k, f in forms.items():
        vals = [f(x) for x in lr]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
        assert r[k]["mean_tok"] == pytest.approx(mean, rel=1e-9) and r[k]["std_tok"] == pytest.approx(std, rel=1e-9)
    assert r["exact_tok"] == pytest.approx(float(exact[mask].mean()))


def test_the_verifier_reads_the_last_integer_and_groups_are_contiguous():
    assert tokens.last_integer("3 + 4 = 7. Answer: 7") == 7
    assert tokens.last_integer("no number") is None
    assert tokens.last_integer("it is -2") == -2
    q = tokens.Questions(["What is 3 + 4?", "What is 1 + 1?"], [7, 2], 2)
    assert q.rewards(["7", "Answer: 8", "2", "2 apples, so 3"]).tolist() == [1.0, 0.0, 1.0, 0.0]
    a, b = tokens.addition_questions(5, 4, seed=3), tokens.addition_questions(5, 4, seed=3)
    assert a == b and all(0 <= x <= 18 for x in a.answers)


def test_the_stored_runs_hold_three_seeds_of_the_chapter_size_with_their_machine():
    data = json.loads((ROOT / "notebooks/data/real_lm_tokens.json").read_text())
    assert sorted(data["seeds"], key=int)[:3] == ["0", "1", "2"]
    assert data["meta"]["model"]["parameters"] == 134_515_008 and data["meta"]["environment"]["cpu"]
    lrs = {f"{lr:g}" for lr in tokens.LRS}
    B = tokens.SIZE["n_prompts"] * tokens.SIZE["group_size"]
    for s in data["seeds"].values():
        assert s["size"] == tokens.SIZE and s["wall_s"] > 0
        assert set(s["step"]) == set(s["step_held_back"]) == lrs
        for step in (*s["step"].values(), *s["step_held_back"].values()):     # one base, with its n
            assert 0 < step["n_live_tokens"] <= step["n_tokens"] and 0 < step["n_live_replies"] <= B
            assert step["clip_frac_0.2"] <= step["clip_frac_0.2_live"] <= 1
            assert step["gspo_seq_clipped"] <= step["n_live_replies"]
        fresh = s["kl"]["fresh"]
        assert fresh["exact_tok"] > 0 and all(fresh[k]["se_tok"] > 0 for k in ("k1", "k2", "k3"))
        assert {"k3+", "k3 x ratio"} <= set(s["kl"]["gradients"])
        assert s["precision"]["bf16 re-forward vs fp32"]["n_seqs"] == tokens.PRECISION_ROWS
        sampled = s["entropy_sampled"]
        assert set(sampled) == set(s["entropy"]) and all(e["n_replies"] == B and e["n_tokens"] > 0
                                                         for e in sampled.values())


def test_the_token_panel_colours_the_chosen_reply_by_the_chosen_quantity():
    from course_lib import widgets
    from course_lib.lm import Replies
    q = tokens.Questions(["What is 1 + 1?"], [2], 2)
    resp = torch.tensor([[10, 11, 2], [12, 2, 2]])
    roll = Replies([[1], [1]], resp, torch.tensor([3, 2]), torch.zeros(2, 3), torch.tensor([False, False]), 1.0)
    texts = [["Two", " is", "<|im_end|>"], ["2", "<|im_end|>"]]
    logp = torch.tensor([[-0.5, -1.0, -0.1], [-2.0, -0.2, 0.0]])
    batch = tokens.ScoredReplies(q, roll, texts, torch.tensor([0.0, 1.0]), torch.tensor([-0.7, 0.7]), logp, -logp)
    panel = widgets.token_panel(batch, {"entropy (nats)": batch.entropy, "log-prob": batch.logp})
    assert panel.controls["reply"].values() == [0, 1]
    page = panel.update(reply=1, quantity="log-prob")._repr_html_()
    assert 'title="-2.000"' in page and "<|im_end|>".replace("<", "&lt;").replace(">", "&gt;") in page
    assert "advantage +0.70" in page and "Two" not in page          # the second reply only
    assert 'title="2.000"' in panel.update(quantity="entropy (nats)")._repr_html_()
    with pytest.raises(ValueError, match="quantity"):
        panel.update(quantity="ratio")


def test_the_gradient_check_finds_each_kl_loss_on_its_side():
    chat = _tiny_chat()
    batch = _tiny_batch(chat)
    moved = tokens.stepped(chat, tokens.reinforce_gradients(chat, batch.rollout, batch.adv), 5e-2)
    g = tokens.gradient_check(moved, chat, batch.rollout, n_positions=12)
    assert g["n_positions"] == 12
    for kind in ("k2", "k1 in reward", "k3+", "k3 x ratio"):                 # the reverse KL's gradient
        assert g[kind]["vs_reverse"] < 1e-9 < g[kind]["vs_forward"], kind
    assert g["k3"]["vs_forward"] < 1e-9 < g["k3"]["vs_reverse"] and g["k1"]["norm_ratio"] < 1e-9
