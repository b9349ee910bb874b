"""course_lib.rewards: DAPO's soft overlong punishment (DAPO Eq. 13)."""
import pytest
import torch

import reference as ref
from course_lib.rewards import overlong_penalty


@pytest.mark.parametrize("max_len,cache_len", [(20, 4), (10, 10), (7, 1), (100, 37)])
def test_overlong_penalty_matches_piecewise_reference_at_every_length(max_len, cache_len):
    lengths = torch.arange(0, max_len + 6)
    got = overlong_penalty(lengths, max_len, cache_len)
    expected = [ref.overlong_penalty(n, max_len, cache_len) for n in lengths.tolist()]
    torch.testing.assert_close(got.double(), torch.tensor(expected, dtype=torch.float64),
                               rtol=1e-6, atol=1e-7)
    assert got.is_floating_point()


def test_overlong_penalty_dapo_paper_setting():
    # DAPO: expected max 16384 tokens plus a 4096 cache, so L_max = 20480, L_cache = 4096
    lengths = torch.tensor([100, 16384, 16385, 18432, 20480, 20481, 30000])
    got = overlong_penalty(lengths, 20480, 4096).tolist()
    assert got == pytest.approx([0.0, 0.0, -1 / 4096, -0.5, -1.0, -1.0, -1.0], abs=1e-7)


def test_overlong_penalty_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="lengths must be >= 0"):
        overlong_penalty(torch.tensor([3, -1]), 10, 4)
    with pytest.raises(ValueError, match="lengths must be an integer tensor"):
        overlong_penalty(torch.tensor([3.0]), 10, 4)
    with pytest.raises(ValueError, match="lengths must be a torch.Tensor"):
        overlong_penalty([3, 4], 10, 4)
    with pytest.raises(ValueError, match=r"lengths must have shape \[B\]"):
        overlong_penalty(torch.tensor([[3]]), 10, 4)
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        overlong_penalty(torch.tensor([3]), 0, 4)
    with pytest.raises(ValueError, match="cache_len must be a positive int"):
        overlong_penalty(torch.tensor([3]), 10, 2.5)
    with pytest.raises(ValueError, match=r"cache_len \(11\) must not exceed max_len \(10\)"):
        overlong_penalty(torch.tensor([3]), 10, 11)
