"""The real model's chat task: its verifiers on hand-made replies, its split, its prompts."""
import json
from pathlib import Path

import pytest

from course_lib.lm.task import (CATEGORIES, UNORDERED, WORDINGS, ChatAdditionTask, Questions, categories, exact,
                                formatted, last_integer, stated_answer)


@pytest.mark.parametrize("reply, answer, want_exact, want_format", [
    ("3 + 4 = 7. Answer: 7", 7, 1.0, 1.0),
    ("Answer: 7", 7, 1.0, 1.0),
    ("Answer:7", 7, 1.0, 1.0),             # no space: still the format asked for
    ("The sum is 7.", 7, 1.0, 0.0),        # right, but not stated as asked
    ("Answer: 8", 7, 0.0, 1.0),            # stated as asked, but wrong
    ("Answer: 7, or maybe 8", 7, 0.0, 1.0),  # the exact verifier reads the last integer
    ("I think 7. Answer: 7.\nCheck: 3 + 4 = 7", 7, 1.0, 1.0),
    ("no number at all", 7, 0.0, 0.0),
    ("answer: 7", 7, 1.0, 0.0),            # the format is case-sensitive: "Answer:"
    ("3 - 5 = -2. Answer: -2", -2, 1.0, 1.0),
    ("0 + 7", 7, 0.0, 0.0),                # a bare restatement of "What is 0 + 7?" states no sum
    ("What is 0 + 7?", 7, 0.0, 0.0),
    ("0 plus 7", 7, 0.0, 0.0),
    ("adding 0 and 7", 7, 0.0, 0.0),
    ("0 + 0", 0, 0.0, 0.0),
    ("0 + 7 = 7", 7, 1.0, 0.0),            # the sum written out, then its value: right
    ("7+0=7. Answer: 7", 7, 1.0, 1.0),
    ("the sum of 0 and 7 is 7", 7, 1.0, 0.0),
])
def test_verifiers_on_hand_made_replies(reply, answer, want_exact, want_format):
    assert exact(reply, answer) == want_exact
    assert formatted(reply, answer) == want_format


def test_the_readers_of_a_reply():
    assert last_integer("10 apples, 12 pears") == 12 and last_integer("none") is None
    assert last_integer("3 + 4") is None and last_integer("3 + 4 = 7, not 2 + 5 + 1") == 7
    assert stated_answer("Answer: 3 ... Answer: 5") == 5 and stated_answer("3") is None


@pytest.mark.parametrize("reply, finished, want", [
    ("3 + 4 = 7. Answer: 7", True, dict(finished=1, formatted=1, exact=1, right_sum=1, no_sum=0)),
    ("7 is it. Or 8", True, dict(finished=1, formatted=0, exact=0, right_sum=1, no_sum=0)),   # right sum, not last
    ("Answer: 8", True, dict(finished=1, formatted=1, exact=0, right_sum=0, no_sum=0)),
    ("Let me think about 3 + 4 step by", False, dict(finished=0, formatted=0, exact=0, right_sum=0, no_sum=1)),
    ("Sure! Numbers are fun", True, dict(finished=1, formatted=0, exact=0, right_sum=0, no_sum=1)),
    ("The answer is 7", False, dict(finished=0, formatted=0, exact=1, right_sum=1, no_sum=0)),
])
def test_each_reply_category_on_hand_made_replies(reply, finished, want):
    got = categories(reply, 7, finished)
    assert list(got) == list(CATEGORIES) and got == {k: float(v) for k, v in want.items()}


def test_the_split_holds_out_unordered_pairs_and_keeps_every_sum_in_training():
    task = ChatAdditionTask()
    train, held = task.pairs("train"), task.pairs("heldout")
    assert len(task.heldout_unordered) == 10 and set(task.heldout_unordered) <= set(UNORDERED)
    assert not set(train) & set(held) and set(train) | set(held) == {(a, b) for a in range(10) for b in range(10)}
    assert all((b, a) in held for a, b in held)                              # both orders of every held-out pair
    assert {(min(p), max(p)) for p in held} == set(task.heldout_unordered)
    assert {a + b for a, b in train} == set(range(19))                       # every sum is asked in training
    assert held == ChatAdditionTask().pairs("heldout")                       # the same every time
    assert held != ChatAdditionTask(split_seed=7).pairs("heldout")
    most = ChatAdditionTask(heldout_pairs=36)                               # 55 pairs, 19 sums each keep one
    assert len(most.heldout_unordered) == 36 and {a + b for a, b in most.pairs("train")} == set(range(19))


def test_no_held_out_pair_is_asked_in_training_in_any_order_or_wording():
    task = ChatAdditionTask()
    train_texts = set(task.questions("train").texts)
    for a, b in task.heldout_unordered:
        for w in WORDINGS:
            assert w.format(a=a, b=b) not in train_texts and w.format(a=b, b=a) not in train_texts


def test_each_held_out_question_names_its_unordered_pair():
    task = ChatAdditionTask()
    q, units = task.questions("heldout"), task.unordered_of("heldout")
    assert len(units) == len(q.texts) and set(units) == set(task.heldout_unordered)
    for text, (a, b) in zip(q.texts, units):
        assert sorted(int(x) for x in text.replace("?", " ").replace(".", " ").split() if x.isdigit()) == [a, b]


def test_questions_repeat_each_prompt_in_a_contiguous_group_and_grade_in_order():
    q = ChatAdditionTask().questions("heldout", group_size=3)
    assert len(q.texts) == 18 * len(WORDINGS) and q.group_size == 3
    a, b = ChatAdditionTask().pairs("heldout")[0]
    assert q.texts[0] == f"What is {a} + {b}?" and q.answers[0] == a + b
    two = Questions(["What is 1 + 1?", "What is 2 + 2?"], [2, 4], 2)
    assert two.rewards(["2", "Answer: 3", "4", "5"]).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert two.rewards(["Answer: 2", "2", "x", "Answer: 9"], "format").tolist() == [1.0, 0.0, 0.0, 1.0]


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="split must be"):
        ChatAdditionTask().pairs("test")
    with pytest.raises(ValueError, match=r"heldout_pairs must be in 1..36 unordered pairs"):
        ChatAdditionTask(heldout_pairs=0)
    with pytest.raises(ValueError, match=r"heldout_pairs must be in 1..36"):
        ChatAdditionTask(heldout_pairs=37)
    with pytest.raises(ValueError, match="verifier must be one of"):
        Questions(["q"], [1], 1).rewards(["1"], "contains")
    with pytest.raises(ValueError, match="3 replies for 1 questions x G = 2"):
        Questions(["q"], [1], 2).rewards(["1", "1", "1"])


# ---- the stored measurement of where the model starts (benchmarks/real_lm_task.py) ---------------
RECORD = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "real_lm_task.json"


def test_the_stored_start_is_of_todays_task_and_its_summaries_are_its_own_data():
    rec = json.loads(RECORD.read_text())
    task = ChatAdditionTask()
    q = task.questions("heldout")
    assert rec["settings"]["questions"] == len(q.texts)
    assert [tuple(p) for p in rec["settings"]["heldout_pairs"]] == task.heldout_unordered     # today's split
    G = rec["settings"]["group_size"]
    assert G >= 64, "pass@k before training is read up to k = 64"
    greedy = rec["greedy"]
    assert greedy["exact_per_question"] == [exact(t, a) for t, a in zip(greedy["texts"], q.answers)]
    assert greedy["pass@1"] == pytest.approx(sum(greedy["exact_per_question"]) / rec["settings"]["questions"])
    for seed, s in rec["seeds"].items():
        answers = [a for a in q.answers for _ in range(G)]
        right = [exact(t, a) for t, a in zip(s["texts"], answers)]           # today's verifier on the stored texts
        assert len(right) == s["replies"] == G * len(q.texts) == len(s["finished"]) == len(s["lengths"])
        assert s["correct_per_group"] == [int(sum(right[i:i + G])) for i in range(0, len(right), G)], seed
        assert s["pass@1"] == pytest.approx(sum(right) / len(right)), seed
        assert s["truncated"] == pytest.approx(1 - sum(s["finished"]) / len(right))
        cats = [categories(t, a, bool(f)) for t, a, f in zip(s["texts"], answers, s["finished"])]
        assert s["categories"] == pytest.approx({c: sum(x[c] for x in cats) / len(cats) for c in CATEGORIES})
        assert 0.1 <= s["pass@1"] <= 0.6, f"seed {seed}: sampled pass@1 {s['pass@1']} outside the 10-60% band"


def test_greedy_replies_to_a_slice_of_held_out_questions_get_their_stored_verdicts():
    """Greedy decoding draws nothing, so the verdicts repeat; another CPU's float path may flip a
    near-tie between two tokens, hence one disagreement in the slice is allowed (and printed)."""
    from course_lib import lm
    rec = json.loads(RECORD.read_text())
    model = lm.load("fp32")
    q = ChatAdditionTask().questions("heldout")
    n = 4
    roll = model.sample(q.prompts(model)[:n], max_new_tokens=rec["settings"]["max_new_tokens"], greedy=True)
    got = [exact(r, a) for r, a in zip(model.responses_text(roll), q.answers[:n])]
    want = rec["greedy"]["exact_per_question"][:n]
    differ = [i for i in range(n) if got[i] != want[i]]
    print(f"greedy verdicts here {got}, stored {want}")
    assert len(differ) <= 1, f"questions {differ}: greedy verdicts {got}, stored {want}"


def test_random_rewards_are_fair_coins_that_no_reply_can_sway():
    import torch
    from course_lib.lm.task import random_rewards
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, 1000, (32, 12), generator=gen)
    by_token = {0: [], 1: []}                  # each reward, by whether its reply starts with token 1
    firsts = []
    for _ in range(400):
        responses = torch.randint(0, 2, (32, 6), generator=gen)
        r = random_rewards(prompts, responses)
        assert r.shape == (32,) and set(r.tolist()) <= {0.0, 1.0}
        assert torch.equal(r, random_rewards(prompts.clone(), responses.clone()))     # the same batch, the same coins
        for first, reward in zip(responses[:, 0].tolist(), r.tolist()):
            by_token[first].append(reward)
        firsts.append(r)
    coins = torch.cat(firsts)
    assert abs(coins.mean().item() - 0.5) < 0.02                                    # 12,800 coins: sd 0.0044
    for rewards in by_token.values():                                               # about 6,400 each: sd 0.0063
        assert abs(sum(rewards) / len(rewards) - 0.5) < 0.03
    responses = torch.randint(0, 2, (32, 6), generator=gen)
    changed = responses.clone()
    changed[5, 0] = 1 - changed[5, 0]
    assert not torch.equal(random_rewards(prompts, responses), random_rewards(prompts, changed))


def test_random_rewards_is_a_verifier_of_the_trainers_task_and_names_bad_shapes():
    import torch
    from course_lib.lm.task import ChatTask, random_rewards
    from course_lib.rl.config import make_config
    assert ChatTask().verifiers["random"] is random_rewards
    assert make_config("real", verifier="random", format_weight=0.0).verifier == "random"
    with pytest.raises(ValueError, match=r"prompts \[B, Lp\] and responses \[B, T\]"):
        random_rewards(torch.zeros(4, 3, dtype=torch.long), torch.zeros(5, 2, dtype=torch.long))
