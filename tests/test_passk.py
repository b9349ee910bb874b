"""The unbiased pass@k estimator against a count over every k-subset of the samples."""
import itertools

import pytest
import torch

from course_lib.passk import pass_at_k, pass_at_k_curve


def brute(n: int, c: int, k: int) -> float:
    """The share of k-subsets of n samples (the first c correct) holding at least one correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 10])
def test_pass_at_k_is_the_share_of_k_subsets_with_a_correct_sample(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert abs(float(pass_at_k(n, c, k)) - brute(n, c, k)) < 1e-12, (n, c, k)


def test_edges_vectors_and_the_curve():
    assert float(pass_at_k(256, 0, 256)) == 0.0 and float(pass_at_k(256, 1, 1)) == pytest.approx(1 / 256)
    assert float(pass_at_k(10, 8, 3)) == 1.0                          # n - c < k: every subset passes
    v = pass_at_k(torch.tensor([8, 8, 8]), torch.tensor([0, 2, 8]), 2)
    assert v.dtype == torch.float64 and v.tolist() == pytest.approx([0.0, brute(8, 2, 2), 1.0])
    curve = pass_at_k_curve(torch.tensor([0, 1, 4]), 8, [1, 2, 8])
    assert curve[1] == pytest.approx((0 + 1 / 8 + 4 / 8) / 3) and curve[8] == pytest.approx(2 / 3)
    assert float(pass_at_k(1024, 3, 512)) == pytest.approx(1 - (512 * 511 * 510) / (1024 * 1023 * 1022))


@pytest.mark.parametrize("args, match", [((4, 5, 1), "c must lie"), ((4, -1, 1), "c must lie"),
                                         ((4, 2, 5), "k \\(5\\) must be <= n"), ((4, 2, 0), "k must be"),
                                         ((4, 1.5, 1), "whole numbers")])
def test_bad_input_names_the_argument(args, match):
    with pytest.raises(ValueError, match=match):
        pass_at_k(*args)


def test_the_long_answer_pass_at_k_helpers_read_counts_and_find_the_crossover(tmp_path):
    import json

    from course_lib.toy import long_answers
    runs = {"A": [{"config": {}, "columns": {}, "passk": {"n": 4, "prompts": 2, "base": [1, 0], "trained": [4, 0]}}]}
    path = tmp_path / "toy_x.json"
    path.write_text(json.dumps({"meta": {}, "runs": runs}))
    counts = long_answers.load_passk(path)
    tab = long_answers.passk_table(counts, [1, 2, 4])
    base, trained = tab["A"]["base"][0], tab["A"]["trained"][0]
    assert base == {1: 0.125, 2: 0.25, 4: 0.5} and trained == {1: 0.5, 2: 0.5, 4: 0.5}
    assert long_answers.crossover_k(base, trained) == 4          # level at k = 4: the base catches up
    assert long_answers.crossover_k(base, {1: 0.5, 2: 0.5, 4: 0.6}) is None


def test_passk_counts_draw_each_prompts_n_samples_from_that_prompt(monkeypatch):
    """A task whose check passes every answer to a prompt whose first operand is even and none to the
    others: each prompt's count must be n or 0 as its own operand says. Counting samples of several
    prompts together, or reading them in another order, gives counts in between or in the wrong place.
    The chunks (7 rows) do not line up with the prompts (5 samples each)."""
    from dataclasses import dataclass
    from typing import ClassVar

    from course_lib.rl import registry
    from course_lib.toy import task as T
    from course_lib.rl.config import RunConfig
    from course_lib.toy.long_answers import passk_counts
    from course_lib.rl import build_model

    @dataclass(frozen=True)
    class EvenTask(T.AdditionTask):
        verifiers: ClassVar[dict] = {"exact": lambda p, r: (T.decode_operands(p)[0] % 2 == 0).float()}
    monkeypatch.setitem(registry.TASKS, "even", lambda cfg: EvenTask(heldout_questions=cfg.heldout_questions))
    cfg = RunConfig(task="even", n_layer=1, d_model=16, n_head=2, heldout_questions=64, device="cpu")
    counts = passk_counts(cfg, build_model(cfg).state_dict(), n=5, n_prompts=12, chunk=7)
    a, _ = T.decode_operands(registry.make_task(cfg).prompts("heldout")[:12])
    want = [5 if x % 2 == 0 else 0 for x in a.tolist()]
    assert 0 < want.count(5) < 12
    assert counts == want
