"""The known-wrong variants' hints describe what the variants actually do.

A hint that says "smaller" must come with a variant whose results are smaller, and so on. Every
hint that uses a direction word is listed in CLAIMS with the quantity the word is about; the test
runs the variant on every case where it fails and measures that quantity against the reference.
A hint with a direction word and no entry in CLAIMS fails the test, so a new hint is checked too.
"""
import math
import re
import subprocess
import sys

import pytest
import torch

from course_lib.judge.grading import ExerciseKit, compare, evaluate
from course_lib.judge.registry import EXERCISES, ROOT

# relation -> words a hint may use for it
WORDS = {
    "larger": ("larger", "too large", "bigger", "too big", "too fast"),
    "smaller": ("smaller", "too small", "too slow"),
    "twice": ("twice",),
    "half": ("half",),
    "negative": ("negative",),
    "towards 1": ("towards 1",),
    "further from 1": ("further from 1",),
}
ANY_WORD = re.compile("|".join(re.escape(w) for ws in WORDS.values() for w in ws), re.I)

# (exercise, variant) -> (relation, quantity the hint speaks of)
CLAIMS = {
    ("ex01_group_advantages", "population_std"): ("larger", "value"),
    ("ex02_rloo", "divides_by_g"): ("smaller", "baseline"),
    ("ex02_rloo", "includes_self"): ("smaller", "value"),
    ("ex03_aggregation", "padding_in_token_mean"): ("smaller", "value"),
    ("ex04_kl_estimators", "k2_without_half"): ("twice", "value"),
    ("ex04_kl_estimators", "k3_naive_exp"): ("negative", "value"),
    ("ex05_ppo_clip", "clip_branch_detached"): ("half", "grad"),
    ("ex06_gspo", "clip_branch_detached"): ("half", "grad"),
    ("ex06_gspo", "padding_in_mean"): ("towards 1", "sequence ratio"),
    ("ex06_gspo", "product_ratio"): ("further from 1", "sequence ratio"),
    ("ex12_adaptive_kl", "no_clip"): ("larger", "step"),
}

KITS = {ex_id: ExerciseKit(ex) for ex_id, ex in EXERCISES.items()}
VARIANTS = [(ex_id, name) for ex_id, kit in KITS.items() for name, _, _ in kit.variants]


def _variant(ex_id, name):
    return next((hint, mod) for n, hint, mod in KITS[ex_id].variants if n == name)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return torch.cat([_flat(v) for v in x])
    if isinstance(x, torch.Tensor):
        return x.detach().double().reshape(-1)
    return torch.tensor([float(x)], dtype=torch.float64)


def _measure(ex_id, mod, quantity):
    """(theirs, reference) pairs of the quantity on every case where the variant is wrong."""
    kit = KITS[ex_id]
    pairs = []
    for i, case in enumerate(kit.cases):
        fn = getattr(mod, case.fn, None)
        if fn is None:
            continue
        ref, got = kit.reference_outcome(i), evaluate(fn, case)
        assert got.error is None, f"{ex_id} variant raised on {case.name}: {got.error}"
        if quantity == "grad":
            if ref.grad is None or got.grad is None or torch.allclose(
                    got.grad.double(), ref.grad.double(), atol=case.grad_atol, rtol=1e-6):
                continue
            pairs.append((_flat(got.grad), _flat(ref.grad)))
            continue
        wrong = compare(got.value, ref.value, "", case.atol, case.rtol)
        fails_check = case.check is not None and case.check(got.value) is not None
        if not (wrong or fails_check):
            continue
        g, w = _flat(got.value), _flat(ref.value)
        if quantity == "baseline":                        # baseline = reward - advantage
            r = _flat(case.args["rewards"])
            g, w = r - g, r - w
        elif quantity == "step":                          # how far beta moved
            beta = float(case.args["beta"])
            g, w = g - beta, w - beta
        pairs.append((g, w))
    return pairs


def _gspo_sequence_ratio(fn, lengths, T=12, seed=0):
    """GSPO's sequence ratio s_i, read off the loss: with one response, A = -1 and a clip range
    wide enough never to bind, the loss is exactly s."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in lengths:
        old = -torch.rand(1, T, generator=g, dtype=torch.float64) - 0.1
        logp = old + 0.2 + 0.05 * torch.randn(1, T, generator=g, dtype=torch.float64)
        mask = torch.arange(T)[None] < n
        out.append(float(fn(logp, old, -torch.ones(1, dtype=torch.float64), mask,
                            eps_low=0.99, eps_high=100.0)))
    return torch.tensor(out, dtype=torch.float64)


def test_every_hint_with_a_direction_word_has_a_claim_to_check():
    unchecked = [(ex_id, name) for ex_id, name in VARIANTS
                 if ANY_WORD.search(_variant(ex_id, name)[0]) and (ex_id, name) not in CLAIMS]
    assert not unchecked, f"hints with a direction word but no entry in CLAIMS: {unchecked}"
    assert set(CLAIMS) <= set(VARIANTS), set(CLAIMS) - set(VARIANTS)


@pytest.mark.parametrize("ex_id,name", sorted(CLAIMS))
def test_the_hints_direction_word_matches_what_the_variant_returns(ex_id, name):
    relation, quantity = CLAIMS[(ex_id, name)]
    hint, mod = _variant(ex_id, name)
    said = [rel for rel, words in WORDS.items()
            if any(re.search(re.escape(w), hint, re.I) for w in words)]
    assert relation in said, f"{name}'s hint does not say {relation!r}: {hint}"
    opposite = {"larger": "smaller", "smaller": "larger"}.get(relation)
    assert opposite not in said, f"{name}'s hint says both {relation!r} and {opposite!r}: {hint}"

    if quantity == "sequence ratio":
        lengths = [1, 3, 6, 12] if relation == "further from 1" else [2, 5, 9]
        got = _gspo_sequence_ratio(getattr(mod, "gspo_loss"), lengths).log().abs()
        want = _gspo_sequence_ratio(KITS[ex_id].reference.gspo_loss, lengths).log().abs()
        if relation == "towards 1":                      # every response here is shorter than T
            assert (got < want).all(), (got, want)
        else:                                            # equal at length 1, then ever further
            assert math.isclose(got[0], want[0], rel_tol=1e-9)
            assert (got[1:] > want[1:]).all() and (got[1:] / want[1:]).diff().gt(0).all()
        return

    pairs = _measure(ex_id, mod, quantity)
    assert pairs, f"{name} is never wrong on {quantity}"
    for got, want in pairs:
        differ = (got - want).abs() > 1e-9 + 1e-6 * want.abs()
        if relation == "negative":
            continue
        assert differ.any()
        g, w = got[differ], want[differ]
        if relation == "larger":
            assert (g.abs() > w.abs()).all(), (g, w)
        elif relation == "smaller":
            assert (g.abs() < w.abs()).all(), (g, w)
        elif relation == "twice":
            torch.testing.assert_close(g, 2 * w)
        elif relation == "half":
            torch.testing.assert_close(g[w.abs() > 1e-9], 0.5 * w[w.abs() > 1e-9])
    if relation == "negative":
        assert any(bool((got < 0).any()) and bool((want >= 0).all()) for got, want in pairs)


def test_check_verbose_prints_each_variants_hint_and_its_size_against_the_reference():
    proc = subprocess.run([sys.executable, "judge.py", "check", "-v", "ex01"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())              # undo the wrapping
    assert "hint: Your advantages are a little larger in magnitude" in out
    # population std instead of Bessel's on [1, 0, 0, 1]: sqrt(4/3) = 1.155 times the reference
    assert "|yours| / |expected|: median 1.155, from 1.155 to 1.155 over the 4 entries" in out


# ------------------------------------------------------------ the general hints (hints.md)

CODE_SPAN = re.compile(r"`([^`]*)`")
HINT_FREE_OF_CODE = ("ex13_diagnose_runs", "ex14_dppo_trust_region", "ex15_reinforce_pp",
                     "ex16_split_token_mean", "ex17_pass_at_k", "ex18_chat_logprobs")


def _solution_expressions(ex) -> list[str]:
    """The right-hand sides of the reference solution's lines, as a reader would type them."""
    out = []
    for line in ex.solution.read_text(encoding="utf-8").splitlines():
        code = line.split("#")[0].strip()
        code = re.sub(r"^(return|\w+\s*=)\s*", "", code)
        if len(code) >= 16 and not code.startswith(("def ", "import ", "from ", '"""', "@")):
            out.append(code)
    return out


@pytest.mark.parametrize("ex_id", HINT_FREE_OF_CODE)
def test_the_general_hints_lead_to_the_mistake_not_to_the_line(ex_id):
    """Hints diagnose; they do not restate the reference solution: no code span with a call, index or
    assignment, and no expression of solution.py."""
    from course_lib.judge.cli import parse_hints
    ex = EXERCISES[ex_id]
    hints = parse_hints(ex.hints.read_text(encoding="utf-8"))
    assert len(hints) == 3
    text = " ".join(" ".join(hints).split())
    code = [c for c in CODE_SPAN.findall(text) if re.search(r"[(\[=]", c)]   # a call, index, assignment
    assert not code, code
    calls = re.findall(r"\btorch\.\w+|\.\w+\(|\w+\([^)]*\)\.\w+", text)  # torch API, a method call
    assert not calls, calls
    flat = text.replace(" ", "")
    leaked = [e for e in _solution_expressions(ex) if e.replace(" ", "") in flat]
    assert not leaked, leaked


# ------------------------------------------------------------ the known mistakes' hints (wrong/*.py)

# Exercises whose known-mistake hints, which `test` prints on the first run, say what to check and never
# the fix: the reader still finds the line (the general ladder, `hint`, goes further, and so does
# `solution` at the end).
MISTAKES_WITHOUT_THE_FIX = ("ex01_group_advantages", "ex02_rloo", "ex03_aggregation",
                            "ex04_kl_estimators", "ex05_ppo_clip", "ex06_gspo", "ex07_cispo",
                            "ex08_sapo", "ex09_tis_mis", "ex10_gae", "ex11_overlong_penalty",
                            "ex12_adaptive_kl", "ex13_diagnose_runs", "ex14_dppo_trust_region",
                            "ex15_reinforce_pp", "ex16_split_token_mean", "ex17_pass_at_k",
                            "ex18_chat_logprobs")
FORMULA = re.compile(r"\b\w+ [-+*/] \w+\b")             # arithmetic on the task's symbols: L - C + t, logits / T
CALL = re.compile(r"\b\w+\([^)]*\)")                    # softmax(...), .item()
ORDER = re.compile(r"(^|[.:;!]\s+)(use|apply|divide|multiply|subtract|add|shift|set|replace|compute|"
                   r"index|gather|mask|keep|drop|detach)\b", re.I)     # an instruction: "...: use it."


@pytest.mark.parametrize("ex_id,name", [(e, n) for e, n in VARIANTS if e in MISTAKES_WITHOUT_THE_FIX])
def test_a_known_mistakes_hint_says_what_to_check_not_the_fix(ex_id, name):
    hint, _ = _variant(ex_id, name)
    text = " ".join(hint.split())
    assert re.search(r"\?|\bcheck\b", text, re.I), f"{name}'s hint asks nothing and names nothing to check: {text}"
    found = FORMULA.findall(text) + CALL.findall(text) + [m.group(2) for m in ORDER.finditer(text)]
    assert not found, f"{name}'s hint gives the fix ({found}): {text}"
    flat = text.replace(" ", "")
    leaked = [e for e in _solution_expressions(EXERCISES[ex_id]) if e.replace(" ", "") in flat]
    assert not leaked, leaked
