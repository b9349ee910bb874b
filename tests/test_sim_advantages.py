"""Chapter 02's estimator table against values written here from each estimator's formula, on the
seed group (rewards [1, 0, 0, 1], lengths [200, 50, 2000, 400])."""
import math

import pytest
import torch

from course_lib.sim import advantages as adv_sim

R, L = [1.0, 0.0, 0.0, 1.0], [200, 50, 2000, 400]
N = sum(L)


@pytest.fixture(scope="module")
def table():
    advs, mask = adv_sim.estimator_advantages(R, L, greedy_reward=1.0, second_reward=[1.0, 1.0, 0.9, 1.0])
    return advs, mask


def first(advs, name):
    return [float(a) for a in advs[name][:, 0]]


def token_whiten(values):
    """(x - mean) / std over the batch's tokens, each response counted |y| times (Bessel)."""
    mean = sum(v * n for v, n in zip(values, L)) / N
    var = sum((v - mean) ** 2 * n for v, n in zip(values, L)) / (N - 1)
    return [(v - mean) / math.sqrt(var + 1e-8) for v in values]


def test_sequence_estimators_match_their_formulas(table):
    advs, _ = table
    assert first(advs, "Dr. GRPO") == pytest.approx([0.5, -0.5, -0.5, 0.5])
    assert first(advs, "RLOO") == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    base = (200 + 400) / N                                        # OPO: length-weighted mean reward
    assert first(advs, "OPO") == pytest.approx([r - base for r in R])
    assert first(advs, "pass@k") == [0.0] * 4                     # two tie for best: R_max - R_2nd = 0
    assert first(advs, "GPG") == pytest.approx([1.0, -1.0, -1.0, 1.0])    # alpha = 4 / 2 nonzero
    assert first(advs, "ReMax") == pytest.approx([0.0, -1.0, -1.0, 0.0])  # greedy answer scored 1


def test_reinforce_pp_whitens_over_tokens_and_equals_its_baseline_form_on_one_group(table):
    advs, _ = table
    assert first(advs, "REINFORCE++") == pytest.approx(token_whiten(R), abs=1e-6)
    assert first(advs, "REINFORCE++-baseline") == pytest.approx(token_whiten(R), abs=1e-6)


def test_gdpo_normalises_each_component_before_summing(table):
    advs, _ = table
    fmt = [1.0, 1.0, 0.9, 1.0]
    z = lambda x: [(v - sum(x) / 4) / (torch.tensor(x).std().item() + 1e-6) for v in x]
    assert first(advs, "GDPO") == pytest.approx(token_whiten([a + b for a, b in zip(z(R), z(fmt))]), abs=1e-5)


def test_optimal_token_baseline_is_the_mean_return_of_the_responses_still_running(table):
    advs, _ = table
    a = advs["optimal token baseline"]
    assert [float(x) for x in a[:, 0]] == pytest.approx([0.5, -0.5, -0.5, 0.5], abs=1e-6)   # all four
    assert [float(a[i, 100]) for i in (0, 2, 3)] == pytest.approx([1 / 3, -2 / 3, 1 / 3], abs=1e-6)
    assert float(a[2, 1000]) == 0.0                 # unique longest past the runner-up: no baseline, G = 0


def test_rows_weigh_each_response_by_token_mean(table):
    advs, mask = table
    rows = adv_sim.estimator_rows({"Dr. GRPO": advs["Dr. GRPO"]}, mask)
    assert rows[0][5:] == pytest.approx([0.5 * n / N * s for n, s in zip(L, (1, -1, -1, 1))])
