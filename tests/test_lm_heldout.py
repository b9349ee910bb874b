"""lm.runs' readings of a held-out measurement, reply by reply, on hand-made measurements of the real task's
held-out questions: the categories, stopping alone, the format x answer table, per-pair results, pass@k and
its crossings, questions gained and lost, the gradient-clip share."""
import math

import pytest

from course_lib.lm import runs
from course_lib.lm.task import WORDINGS, ChatAdditionTask, exact
from course_lib.passk import pass_at_k

TASK = ChatAdditionTask()
QUESTIONS = TASK.questions("heldout")


def measure(make_reply, G: int = 2) -> dict:
    """A held-out measurement as ``real_lm_task.summary`` stores it: ``make_reply(question index, sample,
    answer) -> (text, finished)`` for G replies per question."""
    texts, finished = [], []
    for q, a in enumerate(QUESTIONS.answers):
        for j in range(G):
            t, f = make_reply(q, j, a)
            texts.append(t)
            finished.append(int(f))
    right = [exact(t, a) for t, a in zip(texts, (a for a in QUESTIONS.answers for _ in range(G)))]
    return {"replies": len(texts), "texts": texts, "finished": finished, "lengths": [5] * len(texts),
            "correct_per_group": [int(sum(right[i:i + G])) for i in range(0, len(right), G)]}


def test_categories_are_read_from_the_stored_texts():
    m = measure(lambda q, j, a: (f"Answer: {a}", True) if j == 0 else (f"{a} or maybe {a + 1}", False))
    shares = runs.category_shares(m)
    assert shares == {"finished": 0.5, "formatted": 0.5, "exact": 0.5, "right_sum": 1.0, "no_sum": 0.0}
    assert runs.reply_answers(m)[:4] == [QUESTIONS.answers[0]] * 2 + [QUESTIONS.answers[1]] * 2
    assert runs.group_size(m) == 2


def test_stopping_alone_is_the_accuracy_among_finished_replies():
    # finished replies right 1 in 2 (sample 0 right), cut replies never right
    m = measure(lambda q, j, a: {0: (f"{a}", True), 1: ("no idea", True), 2: ("let me think", False)}[j], G=3)
    assert runs.accuracy_if_finished(m) == 0.5
    assert sum(m["correct_per_group"]) / m["replies"] == pytest.approx(1 / 3)


def test_the_format_answer_table_puts_each_reply_in_one_cell():
    kinds = [lambda a: f"Answer: {a}", lambda a: f"{a}, no: {a + 1}", lambda a: f"Answer: {a + 1}", lambda a: "hmm"]
    m = measure(lambda q, j, a: (kinds[j](a), True), G=4)
    table = runs.format_answer_table(m)
    n = len(QUESTIONS.answers)
    assert sum(len(v) for v in table.values()) == m["replies"]
    assert len(table[(True, "exact")]) == n and len(table[(False, "right sum, not last")]) == n
    assert len(table[(True, "wrong sum only")]) == n and len(table[(False, "no sum")]) == n
    assert table[(True, "exact")][:2] == [0, 4]


def test_per_pair_accuracy_pools_both_orders_and_every_wording():
    first = TASK.heldout_unordered[0]
    m = measure(lambda q, j, a: (f"{a}" if TASK.unordered_of()[q] == first else "?", True))
    acc = runs.pair_accuracy(m)
    assert list(acc) == TASK.heldout_unordered and acc[first] == 1.0 and sum(acc.values()) == 1.0
    mean, se = runs.mean_and_se(list(acc.values()))
    assert mean == 0.1 and se == pytest.approx(math.sqrt(0.1 * 0.9 * 10 / 9) / math.sqrt(10))


def test_an_answer_that_repeats_one_of_the_questions_numbers_is_counted_per_reply():
    # per question, 3 replies: its first number, its sum, and the question with its sum ("0 + 5" states no 0)
    ordered = [pair for pair in TASK.pairs("heldout") for _ in WORDINGS]          # each question's (a, b)
    m = measure(lambda q, j, a: ([f"Answer: {ordered[q][0]}", f"Answer: {a}", f"{QUESTIONS.texts[q]} {a}"][j],
                                 True), G=3)
    echoes = sum(b != 0 for a, b in ordered)               # a + 0: the first number is the sum, not an echo
    assert 0 < echoes < len(ordered)
    assert runs.operand_answer_share(m) == pytest.approx(echoes / (3 * len(ordered)))
    assert runs.operand_answer_share(measure(lambda q, j, a: (f"Answer: {a}", True))) == 0.0


def test_pass_at_k_is_the_unbiased_estimator_averaged_over_questions():
    m = measure(lambda q, j, a: (f"{a}" if j < q % 4 else "?", True), G=4)
    curve = runs.pass_at_k(m, [1, 2, 4, 8])
    assert list(curve) == [1, 2, 4]                                    # k up to the replies per question
    want = [float(pass_at_k(4, m["correct_per_group"], k).mean()) for k in (1, 2, 4)]
    assert list(curve.values()) == pytest.approx(want)
    assert curve[1] == pytest.approx(sum(m["correct_per_group"]) / m["replies"])
    assert runs.crossings({1: 0.2, 2: 0.5, 4: 0.9, 8: 0.95}, {1: 0.6, 2: 0.7, 4: 0.8}) == [4]
    assert runs.crossings({1: 0.2}, {1: 0.6}) == []


def test_questions_gained_and_lost():
    assert runs.gained_lost([0, 3, 0, 5, 1], [2, 0, 0, 1, 9]) == ([0], [1])       # 1 -> 9 is neither


def test_the_gradient_clip_share_counts_steps_above_the_clip():
    run = {"config": {"grad_clip": 1.0},
           "rows": [{"step": 0}, *({"step": s, "grad/norm": g} for s, g in enumerate((0.5, 1.5, 2.0, 1.0), 1))]}
    assert runs.grad_clip_share(run) == 0.5


def test_a_series_leaves_out_the_steps_where_a_metric_is_undefined():
    """The wrong replies' length is NaN on a step whose replies were all right: the step is left out, not the mean."""
    run = {"rows": [{"step": 0}, {"step": 1, "len/wrong": 9.0}, {"step": 2, "len/wrong": float("nan")},
                    {"step": 3, "len/wrong": 5.0}]}
    assert runs.series(run, "len/wrong") == ([1, 3], [9.0, 5.0])
    assert runs.early_late(run, "len/wrong", width=2) == (9.0, 5.0)


def test_trls_curve_is_read_under_its_own_names():
    rec = {"rows": [{"step": 1, "reward": 0.5, "rewards/exact_reward/mean": 0.25}, {"step": 2, "reward": 1.0}]}
    assert runs.trl_series(rec, "reward/mean") == ([1, 2], [0.5, 1.0])
    assert runs.trl_series(rec, "acc/sampled") == ([1], [0.25])


def test_trls_late_means_are_set_beside_the_course_seeds_range():
    course = {s: {"rows": [{"step": 0}, *({"step": t, "reward/mean": v + 0.1 * s} for t, v in ((1, 0.0), (2, 1.0),
                                                                                              (3, 2.0)))]}
              for s in range(3)}                        # late (2 steps) means 1.5, 1.6, 1.7
    inside = {"rows": [{"step": t, "reward": v} for t, v in ((1, 9.0), (2, 1.5), (3, 1.8))]}      # 1.65
    outside = {"rows": [{"step": t, "reward": v} for t, v in ((1, 0.0), (2, 1.0), (3, 1.0))]}     # 1.0
    [(key, seeds, trl, within)] = runs.trl_beside_course(inside, course, ("reward/mean",), width=2)
    assert key == "reward/mean" and seeds == pytest.approx([1.5, 1.6, 1.7]) and trl == pytest.approx(1.65) and within
    assert not runs.trl_beside_course(outside, course, ("reward/mean",), width=2)[0][3]


def test_the_interleaved_timing_is_summed_up_with_its_ranges():
    rec = {"runs": {"course": {"summary": {"median_step_s": 20.0, "step_s_range": [18.0, 25.0], "timed_steps": 10}},
                    "TRL": {"summary": {"median_step_s": 30.0, "step_s_range": [24.0, 33.0], "timed_steps": 11}}},
           "pair_ratios": [1.25, 1.5, 1.75], "load_at_hand_over": [["course", 1.5], ["TRL", 2.25], ["course", 2.0]]}
    t = runs.step_times(rec)
    assert t["course"] == (20.0, 18.0, 25.0, 10) and t["TRL"] == (30.0, 24.0, 33.0, 11)
    assert t["ratio"] == 1.5 and t["pair_ratios"] == (1.25, 1.75, 3) and t["load"] == (1.5, 2.25) and t["overlap"]
    rec["runs"]["TRL"]["summary"]["step_s_range"] = [26.0, 33.0]
    assert not runs.step_times(rec)["overlap"]


def test_a_curve_that_falls_and_grows_back_is_read_from_its_trailing_means():
    steps = list(range(1, 9))
    values = [30.0, 20.0, 10.0, 10.0, 10.0, 20.0, 30.0, 30.0]
    assert runs.low_and_last(steps, values, width=2) == (4, 10.0, 30.0)
    assert runs.low_and_last(steps, values[:5], width=2)[1:] == (10.0, 10.0)      # no growth: the last is the low
