"""The toy task's reward and the policy's sampler, against slow obviously-correct references."""
import pytest
import torch

from course_lib.rl.policy import response_logits, token_logp
from course_lib.toy.policy import TinyGPT, sample
import reference as ref
from course_lib.toy.task import (EOS, EQUALS, PAD, PLUS, AdditionTask, answer_tokens, contains_sum,
                                 correctness, encode_prompts, imperfect_answers, response_mask, to_text)


def _resp(tokens, T=6):
    return torch.tensor([tokens + [PAD] * (T - len(tokens))])


def _prompt(a, b):
    return encode_prompts(torch.tensor([a]), torch.tensor([b]))


@pytest.mark.parametrize("a, b, response, expected", [
    (7, 35, [4, 2, EOS], 1.0),              # "42<eos>"
    (7, 35, [4, 2], 0.0),                   # no EOS: cut off by the budget
    (7, 35, [0, 4, 2, EOS], 0.0),           # leading zero
    (7, 35, [4, 3, EOS], 0.0),              # wrong digit
    (7, 35, [4, EOS], 0.0),                 # too short
    (7, 35, [4, 2, 0, EOS], 0.0),           # too long
    (7, 35, [4, PLUS, 2, EOS], 0.0),        # a non-digit inside
    (0, 0, [0, EOS], 1.0),                  # the sum 0 is written "0"
    (0, 0, [EOS], 0.0),                     # an empty answer is not "0"
    (99, 99, [1, 9, 8, EOS], 1.0),          # three digits
    (50, 50, [1, 0, 0, EOS], 1.0),
    (50, 50, [1, 0, 0, EOS, 0, 0], 1.0),    # anything after EOS is ignored (it would be PAD)
])
def test_reward_matches_hand_made_cases(a, b, response, expected):
    assert float(correctness(_prompt(a, b), _resp(response))[0]) == expected


def _slow_reward(prompt, response) -> float:
    """String reference: decode, cut at the first <eos>, compare with str(a + b)."""
    text = to_text(prompt.tolist())
    a, b = int(text[:2]), int(text[3:5])
    out = to_text(response.tolist())
    if "<eos>" not in out:
        return 0.0
    return float(out.split("<eos>")[0] == str(a + b))


def test_reward_equals_string_reference_on_random_and_near_correct_responses():
    g = torch.Generator().manual_seed(0)
    prompts = AdditionTask(heldout_questions=300).prompts("heldout")
    noisy = imperfect_answers(prompts, 0.5, g, 6)                # mostly near-correct strings
    rand = torch.randint(0, 13, (300, 6), generator=g)           # arbitrary strings (no PAD)
    for resp in (noisy, rand):
        got = correctness(prompts, resp)
        want = torch.tensor([_slow_reward(p, r) for p, r in zip(prompts, resp)])
        assert torch.equal(got, want)
    assert 0.3 < float(correctness(prompts, noisy).mean()) < 0.7  # the warm-start noise level shows


@pytest.mark.parametrize("a, b, response, expected", [
    (7, 35, [4, 2, EOS], 1.0),              # the exact answer passes
    (7, 35, [5, 2, 4, 2, EOS], 1.0),        # "5242": two guesses, one of them right
    (7, 35, [4, 2, 7, 7, 7, 7], 1.0),       # no EOS, junk after the sum
    (7, 35, [4, EOS, 2], 0.0),              # the 2 comes after the EOS
    (7, 35, [4, PLUS, 2, EOS], 0.0),        # not contiguous digits
    (99, 99, [0, 1, 9, 8], 1.0),
    (0, 5, [1, 5, EOS], 1.0),               # a one-digit sum inside "15"
])
def test_lenient_verifier_accepts_the_sum_anywhere_before_eos(a, b, response, expected):
    assert float(contains_sum(_prompt(a, b), _resp(response))[0]) == expected


def test_lenient_verifier_equals_string_reference_and_accepts_more_than_the_exact_one():
    g = torch.Generator().manual_seed(1)
    prompts = AdditionTask(heldout_questions=400).prompts("heldout")
    noisy = imperfect_answers(prompts, 0.5, g, 6)
    rand = torch.randint(0, 13, (400, 6), generator=g)
    digits = torch.randint(0, 10, (400, 6), generator=g)          # long digit strings: many hits
    for resp in (noisy, rand, digits):
        want = torch.tensor([ref.contains_sum(to_text(p.tolist()), to_text(r.tolist()))
                             for p, r in zip(prompts, resp)])
        got = contains_sum(prompts, resp)
        assert torch.equal(got, want)
        assert (got >= correctness(prompts, resp)).all()            # every exact pass passes
    assert contains_sum(prompts, digits).sum() > 10 * correctness(prompts, digits).sum()


def test_response_mask_covers_tokens_up_to_and_including_first_eos():
    resp = torch.tensor([[4, 2, EOS, PAD, PAD], [1, 2, 3, 4, 5], [EOS, PAD, PAD, PAD, PAD]])
    want = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]).bool()
    assert torch.equal(response_mask(resp), want)


def test_prompts_are_fixed_width_and_split_is_disjoint():
    task = AdditionTask()
    tr, he = task.prompts("train"), task.prompts("heldout")
    assert tr.shape == (9500, 6) and he.shape == (500, 6)
    assert (tr[:, 2] == PLUS).all() and (tr[:, 5] == EQUALS).all()
    key = lambda x: set((x[:, 0] * 1000 + x[:, 1] * 100 + x[:, 3] * 10 + x[:, 4]).tolist())
    assert not key(tr) & key(he) and len(key(tr) | key(he)) == 10_000
    assert answer_tokens(198) == [1, 9, 8, EOS]
    with pytest.raises(ValueError, match="split"):
        task.prompts("test")


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logp_with_kv_cache_equals_learner_full_forward(temperature):
    torch.manual_seed(0)
    model = TinyGPT(n_layer=2, d_model=32, n_head=4, block_size=12)
    prompts = AdditionTask().prompts("heldout")[:64]
    g = torch.Generator().manual_seed(1)
    roll = sample(model, prompts, 6, temperature=temperature, generator=g)
    logp, _ = token_logp(response_logits(model, prompts, roll.responses), roll.responses, temperature)
    assert roll.mask.any(dim=1).all()
    diff = (logp - roll.rollout_logp)[roll.mask].abs().max()
    assert diff < 1e-5, f"sampler and learner disagree by {diff:.2e}"
    assert (roll.rollout_logp[~roll.mask] == 0).all()


def test_kv_cache_sampling_draws_the_same_tokens_as_rerunning_the_prefix():
    torch.manual_seed(0)
    model = TinyGPT(n_layer=2, d_model=32, n_head=4, block_size=12)
    prompts = AdditionTask().prompts("heldout")[:64]
    a = sample(model, prompts, 6, generator=torch.Generator().manual_seed(3))
    b = sample(model, prompts, 6, generator=torch.Generator().manual_seed(3), use_cache=False)
    assert torch.equal(a.responses, b.responses)
    assert torch.allclose(a.rollout_logp, b.rollout_logp, atol=1e-5)


def test_logits_noise_makes_the_sampler_disagree_with_the_learner():
    torch.manual_seed(0)
    model = TinyGPT(n_layer=1, d_model=32, n_head=4, block_size=12)
    prompts = AdditionTask().prompts("heldout")[:64]
    roll = sample(model, prompts, 6, generator=torch.Generator().manual_seed(1), logits_noise=0.5)
    logp, _ = token_logp(response_logits(model, prompts, roll.responses), roll.responses)
    assert (logp - roll.rollout_logp)[roll.mask].abs().max() > 0.05


def test_policy_never_emits_pad():
    torch.manual_seed(0)
    model = TinyGPT(n_layer=1, d_model=32, n_head=4, block_size=12)
    with torch.no_grad():
        model.head.weight[PAD] = 10.0                            # even a head that prefers PAD
    prompts = AdditionTask().prompts("heldout")[:32]
    roll = sample(model, prompts, 6, generator=torch.Generator().manual_seed(0))
    assert not ((roll.responses == PAD) & roll.mask).any()


# ---- the shared-prefix forward: a group's prompt runs once, the numbers are a full forward's --------
def _grouped_batch(dtype=torch.float64, G=4):
    torch.manual_seed(0)
    model = TinyGPT(n_layer=2, d_model=32, n_head=4, block_size=12, dtype=dtype)
    prompts = AdditionTask().prompts("heldout")[:16].repeat_interleave(G, dim=0)     # [16 G, Lp], groups
    roll = sample(model, prompts, 6, generator=torch.Generator().manual_seed(5))
    return model, prompts, roll


def _full_forward_logits(model, prompts, responses):
    """Every row's whole sequence through the model at once: no cache, no sharing."""
    seq = torch.cat([prompts, responses], dim=1)
    return model(seq[:, :-1])[:, prompts.shape[1] - 1:]


def test_the_shared_prefix_forward_gives_a_full_forwards_log_probs_and_gradients():
    model, prompts, roll = _grouped_batch()
    weight = torch.randn(roll.responses.shape, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    grads = []
    for logits_of in (response_logits, _full_forward_logits):
        model.zero_grad()
        logp, _ = token_logp(logits_of(model, prompts, roll.responses), roll.responses)
        (logp * weight * roll.mask).sum().backward()
        grads.append((logp.detach(), [p.grad.clone() for p in model.parameters()]))
    (shared, g_shared), (full, g_full) = grads
    assert torch.allclose(shared, full, rtol=0, atol=1e-12)
    for name, a, b in zip(dict(model.named_parameters()), g_shared, g_full):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-13), f"{name}: {(a - b).abs().max():.2e}"


def test_each_distinct_prompt_runs_once_in_sampling_and_in_the_learners_forward():
    """The first block sees P prompt rows plus B continuation rows, not B whole sequences."""
    model, prompts, roll = _grouped_batch(G=4)
    rows = []
    model.blocks[0].register_forward_hook(lambda mod, args, out: rows.append(tuple(args[0].shape[:2])))
    response_logits(model, prompts, roll.responses)
    Lp, T = prompts.shape[1], roll.responses.shape[1]
    assert rows == [(16, Lp), (64, T - 1)], rows
    rows.clear()
    sample(model, prompts, 6, generator=torch.Generator().manual_seed(5))
    assert rows[0] == (16, Lp) and all(r == (64, 1) for r in rows[1:]), rows


def test_prompts_without_repeats_keep_one_plain_forward():
    torch.manual_seed(0)
    model = TinyGPT(n_layer=2, d_model=32, n_head=4, block_size=12)
    prompts = AdditionTask().prompts("heldout")[:8]
    roll = sample(model, prompts, 6, generator=torch.Generator().manual_seed(1))
    assert torch.equal(response_logits(model, prompts, roll.responses),
                       _full_forward_logits(model, prompts, roll.responses))


def test_sharing_the_prompt_draws_the_same_tokens_as_sampling_every_row_alone():
    """float64: the shared and unshared samplers see the same probabilities, so the same draws."""
    model, prompts, roll = _grouped_batch()
    alone = sample(model, prompts, 6, generator=torch.Generator().manual_seed(5), use_cache=False)
    assert torch.equal(roll.responses, alone.responses)
    assert torch.allclose(roll.rollout_logp, alone.rollout_logp, rtol=0, atol=1e-12)


def test_a_chunk_after_a_cached_past_sees_every_past_key_and_only_its_own_earlier_positions():
    """A multi-token chunk continuing a cache is causal counted from the end of the past (a mask aligned
    to the first key would hide the past from all but the chunk's last query)."""
    torch.manual_seed(0)
    model = TinyGPT(n_layer=2, d_model=32, n_head=4, block_size=12, dtype=torch.float64)
    seq = AdditionTask().prompts("heldout")[:5]
    seq = torch.cat([seq, torch.randint(0, 10, (5, 4))], dim=1)                  # [5, 10]
    cache: dict = {}
    head = model(seq[:, :6], cache)
    tail = model(seq[:, 6:], cache)
    assert torch.allclose(torch.cat([head, tail], dim=1), model(seq), rtol=0, atol=1e-12)
