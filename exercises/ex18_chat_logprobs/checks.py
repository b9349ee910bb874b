"""Cases for ex18, graded on the real model (SmolLM2-135M-Instruct, course_lib.lm).

One pool of rows is built per process: chat prompts of different lengths from the model's own template,
written answers (one ending in EOS, one that is a bare EOS, one cut off without EOS, some with padding
after their EOS) and answers the model samples itself, left-padded prompts followed by right-padded
completions, and the model's float32 logits on the whole pool from one forward. Each case is a
sub-batch of the pool (its all-padding columns trimmed: causal attention and padding masks make the
logits of the columns kept independent of them) at its own temperature. The expected values are the
reference solution's, which reads nothing from course_lib.lm; tests/test_ex18.py checks it against a
float64 loop, against course_lib.lm's scorer and against the sampler's own log-probs.

Running the model (importing transformers, loading, sampling, one forward) costs far more than grading,
so the pool is kept twice: in memory for the life of the process, and on disk inside the built model's
folder (``judge_ex18_pool_<key>.pt``, the key a hash of what the pool is made of and of the model's
manifest). Rebuilding the model (``make model``) removes the folder and with it the stored pool; a file
that cannot be read or written is simply computed again.
"""
import hashlib
import json
import os
import sys
import types

import torch

from course_lib.judge.cases import Case, gen

FN = "completion_logprobs"
SYSTEM = "Answer with the number."
# (question, written answer, whether it ends in EOS); prompts of different lengths
WRITTEN = [("What is 3 + 4?", "3 + 4 = 7", True),
           ("Name a prime number.", "7", True),
           ("2 + 2?", "", True),                                              # the answer is EOS alone
           ("Count from one to five, briefly please.", "1, 2, 3, 4, 5, and then", False)]   # cut off
SAMPLED = ["What is 5 + 1?", "What is 6 + 3? Show the sum.", "Pick a number from 1 to 9."]
SAMPLE_T, SAMPLE_SEED = 0.9, 18
C_MAX = 8                                       # completion width of the pool (max_new_tokens)

# checks.py is executed afresh for every ExerciseKit (never imported), so a module-level cache would not
# outlive it; a placeholder module in sys.modules does, for the life of the process (the judge's worker
# and the tests build many kits, and the model's forward is the slow part).
_CACHE = sys.modules.setdefault("_course_ex18_cache", types.ModuleType("_course_ex18_cache"))


def pool() -> dict:
    """The pool: ids [N, P + C], mask [N, C], logits [N, P + C, V] float32, prompt_len [N], comp_len [N],
    P, C, the row indices of the written and the sampled answers, and the sampler's own log-probs of the
    sampled ones [len(SAMPLED), C_MAX]. Built once, then read back (memory, else the model's folder)."""
    if getattr(_CACHE, "pool", None) is None:
        _CACHE.pool = _stored_pool()
    return _CACHE.pool


def _not_built(lm, exc) -> Exception:
    return lm.ModelNotBuilt(f"ex18 is graded on the real model, which is not built here: run "
                            f"`{lm.BUILD_COMMAND}` once (about a minute), then grade again ({exc})")


def pool_file():
    """Where the pool is stored: inside the built model's folder, named by a hash of its recipe."""
    from course_lib import lm
    folder = lm.cache_dir()
    if not lm.is_built(folder):
        raise _not_built(lm, f"no built model in {folder}")
    recipe = json.dumps([SYSTEM, WRITTEN, SAMPLED, SAMPLE_T, SAMPLE_SEED, C_MAX,
                         (folder / lm.MANIFEST).read_text()], sort_keys=True)
    return folder / f"judge_ex18_pool_{hashlib.sha256(recipe.encode()).hexdigest()[:16]}.pt"


def _stored_pool() -> dict:
    path = pool_file()
    if path.is_file():
        try:
            return torch.load(path, weights_only=True)
        except Exception:                       # damaged or from another torch: compute it again
            pass
    built = _build_pool()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        torch.save(built, tmp)
        os.replace(tmp, path)                    # whole or not at all
    except OSError:
        tmp.unlink(missing_ok=True)
    return built


def _build_pool() -> dict:
    from course_lib import lm
    try:
        model = lm.load("fp32")
    except lm.ModelNotBuilt as exc:
        raise _not_built(lm, exc) from None
    tok, eos, pad = model.tokenizer, model.eos_id, model.pad_id
    prompts, answers = [], []
    for question, text, ends in WRITTEN:
        prompts.append(model.chat_ids(question, SYSTEM))
        ids = tok(text, add_special_tokens=False)["input_ids"] if text else []
        answers.append((ids + [eos] if ends else ids)[:C_MAX])
    sampled_prompts = [model.chat_ids(q, SYSTEM) for q in SAMPLED]
    rollout = model.sample(sampled_prompts, max_new_tokens=C_MAX, temperature=SAMPLE_T, seed=SAMPLE_SEED)
    for p, row, n in zip(sampled_prompts, rollout.response.tolist(), rollout.lengths.tolist()):
        prompts.append(p)
        answers.append(row[:n])
    N, P, C = len(prompts), max(map(len, prompts)), max(map(len, answers))
    ids = torch.full((N, P + C), pad, dtype=torch.long)
    attn = torch.zeros(N, P + C, dtype=torch.long)
    for b, (p, a) in enumerate(zip(prompts, answers)):
        ids[b, P - len(p):P] = torch.tensor(p)                       # prompts padded on the left
        ids[b, P:P + len(a)] = torch.tensor(a, dtype=torch.long)     # completions on the right
        attn[b, P - len(p):P + len(a)] = 1
    positions = (attn.cumsum(1) - 1).clamp(min=0)                     # real tokens count from 0
    with torch.no_grad():
        logits = model.model(input_ids=ids, attention_mask=attn, position_ids=positions).logits.float()
    comp_len = torch.tensor([len(a) for a in answers])
    return {"ids": ids, "logits": logits, "mask": attn[:, P:].bool(), "P": P, "C": C,
            "prompt_len": torch.tensor([len(p) for p in prompts]), "comp_len": comp_len,
            "written": list(range(len(WRITTEN))), "sampled": list(range(len(WRITTEN), N)),
            "sampler_logp": rollout.logp, "sample_T": SAMPLE_T}


def sub_batch(rows) -> dict:
    """The pool's rows ``rows`` as a batch of their own: the left-padding columns that every chosen
    prompt leaves empty and the padding columns after the longest chosen completion are dropped."""
    p = pool()
    rows = torch.as_tensor(rows)
    P_b, C_b = int(p["prompt_len"][rows].max()), int(p["comp_len"][rows].max())
    cols = slice(p["P"] - P_b, p["P"] + C_b)
    return {"logits": p["logits"][rows][:, cols].clone(), "input_ids": p["ids"][rows][:, cols].clone(),
            "completion_mask": p["mask"][rows][:, :C_b].clone()}


# float32 log-softmaxes over 49,152 logits of size 30-40 differ by up to about 5e-5 from the float64 truth
# (torch's own log_softmax measured 4.4e-5 here; logsumexp-then-gather 2e-6): the values' tolerance is set
# for float32, and the gradient cases pass the same logits as float64 to be compared tightly.
ATOL, RTOL, GRAD_ATOL = 2e-4, 1e-4, 1e-9


def _case(name, rows, temperature, *, kind="fixed", sample=False):
    args = dict(sub_batch(rows), temperature=float(temperature))
    if kind != "grad":
        return Case(name, FN, args, kind=kind, sample=sample, atol=ATOL, rtol=RTOL)
    args["logits"] = args["logits"].double()
    return Case(name, FN, args, kind="grad", sample=sample, grad_wrt="logits", out_grad="required",
                atol=ATOL, rtol=RTOL, grad_atol=GRAD_ATOL)


def _away_from_1(g) -> float:
    """A temperature in [0.5, 0.85] or [1.15, 1.5], two decimals."""
    step = 0.15 + 0.35 * float(torch.rand((), generator=g))
    return round(1 - step if bool(torch.rand((), generator=g) < 0.5) else 1 + step, 2)


def cases():
    p = pool()
    W, S = p["written"], p["sampled"]
    all_rows = W + S
    g = gen(18)
    out = [
        _case("fixed: a batch of one (a written answer ending in EOS), temperature 1", [W[0]], 1.0, sample=True),
        _case("fixed: a batch of one, an answer cut off without EOS, temperature 0.7", [W[3]], 0.7, sample=True),
        _case("fixed: left padding, three prompts of different lengths, temperature 1", [W[0], W[1], W[3]], 1.0),
        _case("edge: answers ending in EOS followed by padding (the pad id is the EOS id), temperature 1",
              [W[0], W[1], W[2]], 1.0, kind="edge", sample=True),
        _case("edge: a batch of one whose answer is EOS alone, temperature 1.3", [W[2]], 1.3, kind="edge"),
        _case(f"random: answers sampled from the model at temperature {p['sample_T']}, scored at the same "
              "temperature", S, p["sample_T"], kind="random", sample=True),
    ]
    for _ in range(2):
        k = int(torch.randint(2, 4, (), generator=g))
        rows = sorted(torch.randperm(len(all_rows), generator=g)[:k].tolist())
        T = _away_from_1(g)
        out.append(_case(f"random: {k} rows drawn from the written and sampled answers, temperature {T}",
                         [all_rows[r] for r in rows], T, kind="random"))
    out.append(_case("grad: gradient w.r.t. logits (float64), left padding and padding after EOS, temperature 0.8",
                     [W[1], S[0]], 0.8, kind="grad"))
    out.append(_case("grad: gradient w.r.t. logits (float64), a batch of one sampled answer, temperature 1.2",
                     [S[1]], 1.2, kind="grad"))
    return out
