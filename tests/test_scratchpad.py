"""The long-answer task (course_lib.toy.scratchpad) against string-level references."""
import re

import pytest
import torch

from course_lib.toy import scratchpad as S
from course_lib.toy.task import EOS, PAD, response_mask

FORMAT = re.compile(r"^((\d\+\d=\d|\d)c?;)*>(0|[1-9]\d{0,3})<eos>$")


def _text_until_eos(row) -> str | None:
    """The row as text up to and including its first EOS, or None without one."""
    text = S.to_text([t for t in row if t != PAD])
    return text[: text.index("<eos>") + 5] if "<eos>" in text else None


def ref_exact(a: int, b: int, row) -> float:
    text = _text_until_eos(row)
    if text is None:
        return 0.0
    body = text[: -len("<eos>")]
    return float(">" in body and body[body.rindex(">") + 1:] == str(a + b))


def ref_format(row) -> float:
    text = _text_until_eos(row)
    return float(text is not None and FORMAT.match(text) is not None)


def _pad(rows, T):
    return torch.tensor([r[:T] + [PAD] * (T - len(r[:T])) for r in rows])


def _cases(n=400, T=48, seed=0):
    """Random operands and responses: correct traces of every style, traces with slips, traces cut
    short, single tokens changed, and uniform random tokens (EOS and '>' among them, PAD not: the
    sampler never emits it)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(1000, (n,), generator=g)
    b = torch.randint(1000, (n,), generator=g)
    rows = []
    for i in range(n):
        x, y, kind = int(a[i]), int(b[i]), i % 6
        style = S.STYLES[i % len(S.STYLES)]
        row = S.trace(x, y, style, S.SLIPS[i % 3] if kind == 1 else None, i % 3)
        if kind == 2:                                       # cut: no EOS
            row = row[: max(1, len(row) - 1 - i % 5)]
        elif kind == 3:                                     # one token changed
            j = int(torch.randint(len(row), (1,), generator=g))
            row = row[:j] + [int(torch.randint(17, (1,), generator=g))] + row[j + 1:]
        elif kind == 4:
            row = torch.randint(17, (int(torch.randint(1, T + 1, (1,), generator=g)),), generator=g).tolist()
        elif kind == 5:                                     # a leading zero, or an answer twice
            row = row[:-1] + ([S.ANSWER] + row[row.index(S.ANSWER) + 1:-1] if i % 2 else []) + [EOS]
            if i % 4 == 1:
                row = row[: row.index(S.ANSWER) + 1] + [0] + row[row.index(S.ANSWER) + 1:]
        rows.append([S.VOCAB_SIZE - 1 if t == PAD else t for t in row])   # a sampler never emits PAD
    return a, b, _pad(rows, T)


def test_the_exact_verifier_reads_the_last_answer_before_eos_as_the_strings_say():
    a, b, resp = _cases()
    prompts = S.encode_prompts(a, b)
    got = S.correctness(prompts, resp).tolist()
    want = [ref_exact(int(x), int(y), r) for x, y, r in zip(a, b, resp.tolist())]
    assert got == want
    assert 0.2 < sum(want) / len(want) < 0.8                     # both outcomes are exercised


def test_the_format_verifier_is_the_format_grammar():
    a, b, resp = _cases(seed=1)
    got = S.well_formed(S.encode_prompts(a, b), resp).tolist()
    want = [ref_format(r) for r in resp.tolist()]
    assert got == want
    assert 0.2 < sum(want) / len(want) < 0.9


@pytest.mark.parametrize("text, exact, form", [
    ("7+8=5c;5+6=2c;4+1=6;>625<eos>", 1, 1),
    (">625<eos>", 1, 1),
    ("5c;2c;6;>625<eos>", 1, 1),
    ("5c;2c;6;>624<eos>", 0, 1),          # well formed, wrong
    (">600<eos>>625<eos>", 0, 1),         # graded up to the first EOS only
    (">600>625<eos>", 1, 0),              # the last '>' counts; two markers are not the format
    (">0625<eos>", 0, 0),                 # leading zero
    ("7+8=5c;5+6=2c;4+1=6;>625", 0, 0),   # truncated: no EOS
    ("7+8=5c5+6=2c;>625<eos>", 1, 0),     # a step without its ';'
    ("5c;2c;6>625<eos>", 1, 0),           # the last step without its ';'
    ("625<eos>", 0, 0),                   # no marker
])
def test_hand_written_responses(text, exact, form):
    sym = {"+": 10, "=": 11, ";": S.SEP, "c": S.CARRY, ">": S.ANSWER}
    toks, rest = [], text
    while rest:
        if rest.startswith("<eos>"):
            toks.append(EOS)
            rest = rest[5:]
        else:
            toks.append(sym.get(rest[0], None) if not rest[0].isdigit() else int(rest[0]))
            rest = rest[1:]
    resp = _pad([toks], 48)
    prompts = S.encode_prompts(torch.tensor([457]), torch.tensor([168]))
    assert S.to_text(toks) == text
    assert (float(S.correctness(prompts, resp)), float(S.well_formed(prompts, resp))) == (exact, form)


def test_traces_verify_and_slips_break_the_answer():
    g = torch.Generator().manual_seed(2)
    for x, y in torch.randint(1000, (300, 2), generator=g).tolist():
        prompts = S.encode_prompts(torch.tensor([x]), torch.tensor([y]))
        for style in S.STYLES:
            clean = S.trace(x, y, style)
            assert S.to_text(clean).endswith(f">{x + y}<eos>")
            assert float(S.correctness(prompts, _pad([clean], 48))) == 1.0 == ref_format(clean)
            for slip in S.SLIPS:
                for col in range(S.DIGITS):
                    row = S.trace(x, y, style, slip, col)
                    carried = (x // 10 ** col % 10 + y // 10 ** col % 10 + (x % 10 ** col + y % 10 ** col
                                                                          >= 10 ** col)) >= 10
                    changes = slip != "carry" or carried or style == "answer"
                    assert float(S.correctness(prompts, _pad([row], 48))) == float(not changes), (x, y, style, slip)
                    assert ref_format(row) == 1.0


def test_prompts_split_once_and_decode():
    task = S.ScratchpadTask(heldout_questions=300)
    train, held = task.prompts("train"), task.prompts("heldout")
    assert held.shape == (300, 8) and train.shape == (10 ** 6 - 300, 8)
    code = lambda p: set((p[:, :3] @ torch.tensor([100, 10, 1]) * 1000 + p[:, 4:7] @ torch.tensor([100, 10, 1])).tolist())
    assert not code(train[:50_000]) & code(held) and len(code(held)) == 300
    a, b = S.decode_operands(held)
    assert torch.equal(S.encode_prompts(a, b), held)
    assert S.to_text(S.encode_prompts(torch.tensor([7]), torch.tensor([35]))[0]) == "007+035="
    with pytest.raises(ValueError, match="split"):
        task.prompts("test")
    with pytest.raises(ValueError, match="a must lie"):
        S.encode_prompts(torch.tensor([1000]), torch.tensor([0]))


def test_warm_answers_mix_the_styles_and_the_slips_at_every_length():
    task = S.ScratchpadTask()
    prompts = task.prompts("train")[:8000]
    w = task.warm_answers(prompts, 0.3, torch.Generator().manual_seed(0), 48)
    assert w.shape == (8000, 48)
    lengths = response_mask(w).sum(1)
    ok = S.correctness(prompts, w)
    assert bool((w == EOS).any(1).all())                          # every trace fits the budget of 48
    assert float(S.well_formed(prompts, w).mean()) == 1.0
    assert 0.7 - 0.03 < float(ok.mean()) < 0.7 + 0.12              # slips; a forgotten carry can be harmless
    for lo, hi in ((3, 7), (8, 16), (20, 28), (39, 49)):         # the four styles' length bands
        band = (lengths >= lo) & (lengths < hi)
        assert band.float().mean() > 0.15
        assert 0 < float(ok[band].mean()) < 1                       # right and wrong at every length
    short = task.warm_answers(prompts[:50], 0.0, torch.Generator().manual_seed(0), 10)
    assert short.shape == (50, 10)                                  # cut by max_len: no EOS in long ones
    with pytest.raises(ValueError, match="style_shares"):
        S.ScratchpadTask(style_shares=(0.5, 0.5))


def test_the_answer_zero_is_well_formed_and_a_leading_zero_in_a_longer_answer_is_not():
    prompts = S.encode_prompts(torch.tensor([0]), torch.tensor([0]))              # "000+000="
    for style in S.STYLES:
        row = S.trace(0, 0, style)
        assert S.to_text(row).endswith(">0<eos>")
        resp = _pad([row], 48)
        assert (float(S.correctness(prompts, resp)), float(S.well_formed(prompts, resp))) == (1.0, 1.0), style
    for answer, form in (([0], 1.0), ([0, 0], 0.0), ([0, 5], 0.0), ([0, 1, 2], 0.0), ([1, 0], 1.0),
                         ([1, 0, 0, 0], 1.0)):
        row = [S.ANSWER, *answer, EOS]
        assert float(S.well_formed(prompts, _pad([row], 48))) == form == ref_format(row), answer
