"""Exercise 18 (log-probs of a chat batch) on the real model: the reference solution against a float64
loop and the analytic gradient, against the sampler's own log-probs and course_lib.lm's scorer (two
implementations that share no code with it); the pool's layout (left-padded chat prompts, EOS then
padding where the pad id is the EOS id); sub-batches that keep the logits of a batch of their own; the
pool stored in the model's folder equal to a fresh build; the judge's message without a built model."""
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from course_lib import lm
from course_lib.judge.registry import EXERCISES, ROOT

EX = EXERCISES["ex18_chat_logprobs"]
FP32_TOL = 2e-4          # two float32 forwards of one sequence agree to about 2e-5 (real_lm.md, test_lm)
FLOAT_PATH_TOL = 2e-3    # the same forward on two float paths (AVX2 against ATen's default kernels): 3e-4


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CHECKS = _load(EX.dir / "checks.py", "_t_ex18_checks")
SOL = _load(EX.solution, "_t_ex18_solution").completion_logprobs


@pytest.fixture(scope="module")
def pool():
    return CHECKS.pool()


@pytest.fixture(scope="module")
def model():
    return lm.load("fp32")


def _loop64(logits, input_ids, completion_mask, temperature):
    """Token by token in float64: the log-softmax of the position before each completion token."""
    B, L = input_ids.shape
    C = completion_mask.shape[1]
    out = torch.zeros(B, C, dtype=torch.float64)
    for b in range(B):
        for t in range(C):
            if completion_mask[b, t]:
                z = logits[b, L - C + t - 1].double() / temperature
                out[b, t] = z[input_ids[b, L - C + t]] - torch.logsumexp(z, 0)
    return out


def _rows(pool, rows):
    """The pool's prompts, responses [B, T] and lengths of the given rows, as course_lib.lm takes them."""
    P, ids = pool["P"], pool["ids"]
    prompts = [ids[r, P - int(pool["prompt_len"][r]):P].tolist() for r in rows]
    lengths = pool["comp_len"][rows]
    return prompts, ids[rows, P:P + int(lengths.max())], lengths


def test_every_case_agrees_with_a_float64_loop_and_its_gradient_with_the_formula():
    """Values within 1e-5 of float64 (the float32 reference is a logsumexp, not a log_softmax), exactly 0
    off the mask; gradient of sum_t w_t out_t w.r.t. logits[b, i] = w_t (onehot - softmax(z / T)) / T at
    i = L - C + t - 1 and 0 everywhere else."""
    cases = CHECKS.cases()
    assert {c.kind for c in cases} == {"fixed", "edge", "random", "grad"} and len(cases) == 10
    for case in cases:
        a = case.args
        got = SOL(**a)
        want = _loop64(**a)
        assert got.dtype == a["logits"].dtype and got.shape == a["completion_mask"].shape, case.name
        assert (got.double() - want).abs().max() < 1e-5, case.name
        assert (got[~a["completion_mask"]] == 0).all(), case.name
        if case.kind != "grad":
            continue
        logits = a["logits"].clone().requires_grad_(True)
        w = torch.rand(got.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        (grad,) = torch.autograd.grad((SOL(logits, a["input_ids"], a["completion_mask"], a["temperature"]) * w).sum(),
                                      logits)
        B, L = a["input_ids"].shape
        C, T = a["completion_mask"].shape[1], a["temperature"]
        expect = torch.zeros_like(grad)
        for b in range(B):
            for t in range(C):
                if a["completion_mask"][b, t]:
                    i = L - C + t - 1
                    onehot = torch.zeros(logits.shape[-1], dtype=torch.float64)
                    onehot[a["input_ids"][b, i + 1]] = 1.0
                    expect[b, i] = w[b, t] * (onehot - torch.softmax(a["logits"][b, i] / T, 0)) / T
        torch.testing.assert_close(grad, expect, rtol=0, atol=1e-12)


def test_the_reference_gives_the_samplers_own_log_probs(pool):
    """The KV-cache sampler stored the log-prob of each token it drew, at T = 0.9: the reference, run
    on the full forward's logits of the same tokens, gives them back (shift, temperature and mask)."""
    S, T = pool["sampled"], pool["sample_T"]
    batch = CHECKS.sub_batch(S)
    got = SOL(**batch, temperature=T)
    want = pool["sampler_logp"][:, :got.shape[1]]
    mask = batch["completion_mask"]
    assert (got - want)[mask].abs().max() < FP32_TOL
    assert (SOL(**batch, temperature=1.0) - want)[mask].abs().max() > 0.05     # T matters on these tokens


def test_the_reference_equals_course_lib_lm_score(pool, model):
    """course_lib.lm scores the written answers by its own forward of prompt + response (left padding,
    position ids from the attention mask): the same log-probs at T = 0.7 and 1.3."""
    rows = pool["written"]
    prompts, response, lengths = _rows(pool, rows)
    batch = CHECKS.sub_batch(rows)
    for T in (0.7, 1.3):
        with torch.no_grad():
            want, _ = model.score(prompts, response, lengths, temperature=T)
        got = SOL(**batch, temperature=T)
        assert (got - want).abs().max() < FP32_TOL, T


def test_the_pool_is_a_left_padded_chat_batch_whose_eos_is_also_its_pad(pool, model):
    ids, mask, P, C = pool["ids"], pool["mask"], pool["P"], pool["C"]
    eos = model.eos_id
    assert eos == model.pad_id == 2
    suffix = model.tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    assert len(set(pool["prompt_len"].tolist())) >= 4                       # prompts of different lengths
    for r in range(ids.shape[0]):
        n_p, n_c = int(pool["prompt_len"][r]), int(pool["comp_len"][r])
        assert (ids[r, :P - n_p] == eos).all() and ids[r, P - n_p] == 1  # left padding, then <|im_start|>
        assert ids[r, P - len(suffix):P].tolist() == suffix                  # every prompt ends in column P - 1
        assert mask[r].tolist() == [t < n_c for t in range(C)]              # the mask comes from the length
        assert (ids[r, P + n_c:] == eos).all()                              # padding after the completion
    W = pool["written"]
    ends = [bool(ids[r, P + int(pool["comp_len"][r]) - 1] == eos) for r in W]
    assert ends == [e for _, _, e in CHECKS.WRITTEN]
    assert int(pool["comp_len"][W[2]]) == 1                                  # EOS alone
    assert int(pool["comp_len"][W[3]]) == C == CHECKS.C_MAX                  # cut off, no EOS
    # what a mask rebuilt from the ids loses: every real EOS
    rebuilt = ids[:, P:] != model.pad_id
    lost = mask & ~rebuilt
    assert lost.sum() == sum(ends) + sum(bool(ids[r, P + int(pool["comp_len"][r]) - 1] == eos)
                                         for r in pool["sampled"])


def test_a_sub_batch_keeps_the_log_probs_of_a_batch_of_its_own(pool, model):
    """Dropping the columns that are padding in every chosen row leaves each row's log-probs as a forward
    of that sub-batch alone gives them (within the fp32 agreement of padded batches)."""
    for rows in ([pool["written"][1], pool["sampled"][0]], [pool["written"][2]]):
        batch = CHECKS.sub_batch(rows)
        ids = batch["input_ids"]
        width = ids.shape[1] - batch["completion_mask"].shape[1]               # the prompts' columns
        prompt_attn = torch.arange(width)[None, :] >= width - pool["prompt_len"][rows][:, None]
        attn = torch.cat([prompt_attn, batch["completion_mask"]], dim=1).long()
        with torch.no_grad():
            alone = model.model(input_ids=ids, attention_mask=attn,
                                position_ids=(attn.cumsum(1) - 1).clamp(min=0)).logits.float()
        got = SOL(**batch, temperature=1.0)
        want = SOL(alone, ids, batch["completion_mask"], 1.0)
        assert (got - want).abs().max() < FP32_TOL, rows


def test_the_stored_pool_is_a_fresh_build_and_its_name_follows_the_recipe(pool, one_thread, monkeypatch):
    """The judge's worker reads the pool back from the model's folder: it must be what the model gives
    now (same tokens, logits within float noise), and any change of the recipe must change its name."""
    path = CHECKS.pool_file()
    assert path.is_file() and path.parent == lm.cache_dir()
    stored = torch.load(path, weights_only=True)
    fresh = CHECKS._build_pool()
    for key in ("ids", "mask", "prompt_len", "comp_len"):
        assert torch.equal(stored[key], fresh[key]), key
        assert torch.equal(pool[key], fresh[key]), key
    # The pool may come from another float path than this run's: `make test` builds it with AVX2 kernels and
    # `make test-portable` reads it with ATen's plain ones (3e-4 apart on logits up to 42, measured here).
    assert (stored["logits"] - fresh["logits"]).abs().max() < FLOAT_PATH_TOL
    monkeypatch.setattr(CHECKS, "SAMPLE_SEED", CHECKS.SAMPLE_SEED + 1)
    assert CHECKS.pool_file() != path


def test_without_a_built_model_the_judge_names_make_model(tmp_path):
    env = dict(os.environ, COURSE_LM_DIR=str(tmp_path / "no_model"), PYTHONPATH=str(ROOT),
               COURSE_JUDGE_WORKSPACE=str(tmp_path / "workspace"), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "judge.py", "test", "ex18", str(EX.solution)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "`make model`" in out, out
    assert "bug" not in out and "Traceback" not in out, out          # a setup step, not a crash of ours
