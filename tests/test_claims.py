"""course_lib.claims: a claim that holds prints one portable line; one that fails names the number."""
import numpy as np
import pytest
import torch

from course_lib import claims
from course_lib.claims import ClaimError, claim


def test_holding_claims_print_the_claim_and_never_the_computed_value(capsys):
    claim("k3 is never negative", True)
    claim("exact KL", 0.050249, "0.0502")
    claim("k1's mean", 0.04981, 0.0497, tol=0.002, tol_text="3 standard errors")
    claim("a share", torch.tensor(0.25), 0.25, tol=0.0)
    out = capsys.readouterr().out.splitlines()
    assert out == ["✓ k3 is never negative", "✓ exact KL = 0.0502",
                   "✓ k1's mean = 0.0497 within 3 standard errors", "✓ a share = 0.25 within ± 0"]


@pytest.mark.parametrize("args, kw, says", [
    (("exact KL", 0.05031, "0.0502"), {}, "claimed 0.0502, computed 0.0503 (moved by +0.00011)"),
    (("k1's mean", 0.0530, 0.0497), {"tol": 0.002, "tol_text": "3 s.e."},
     "claimed 0.0497 within 3 s.e. (± 0.002), computed 0.053 (moved by +0.0033)"),
    (("k3 spreads more than k1", False), {}, "k3 spreads more than k1: does not hold"),
    (("a NaN never holds", float("nan"), 0.0), {"tol": 1.0}, "computed nan"),
])
def test_a_failing_claim_raises_under_tests_naming_what_moved(args, kw, says):
    with pytest.raises(ClaimError, match="✗ .*") as e:
        claim(*args, **kw)
    assert says in str(e.value)


def test_a_failing_claim_warns_in_a_readers_kernel_and_runs_on(monkeypatch, capsys):
    monkeypatch.delenv(claims.STRICT_VARIABLE)
    claim("exact KL", 0.0531, "0.0502")
    err = capsys.readouterr().err
    assert "✗ exact KL: claimed 0.0502, computed 0.0531" in err and "runs on" in err


def test_digits_compare_the_rounded_value_and_negative_zero_is_zero(capsys):
    claim("tiny bias", -0.00004, "0.0000")
    claim("count", 44, "44")
    claim("share", np.float64(0.4449), "0.445")
    with pytest.raises(ClaimError):
        claim("share", 0.4444, "0.445")


@pytest.mark.parametrize("args, kw, err", [
    (("", True), {}, TypeError),
    (("x", 1.0), {}, TypeError),                      # a number without an expected value
    (("x", True), {"tol": 0.1}, ValueError),
    (("x", 1.0, 1.0), {}, ValueError),                # a number expected without a tolerance
    (("x", 1.0, 1.0), {"tol": -1}, ValueError),
    (("x", 1.0, "1.0"), {"tol": 0.1}, ValueError),
    (("x", "1.0", "1.0"), {}, TypeError),
    (("x", 1.0, "one"), {}, ValueError),
])
def test_bad_arguments_are_named(args, kw, err):
    with pytest.raises(err):
        claim(*args, **kw)


def test_tests_run_strict():
    assert claims.strict()


@pytest.mark.parametrize("value, expected", [
    (0.87, "+0.87"), (-0.8660, "-0.87"), (0.4449, "44%"), (1.083e-3, "+1.08e-03"), (-1.083e-4, "-1.08e-04"),
    (12.4, "12"), (3e22, "3e+22"), (5.2e22, "5e+22"), (-0.00004, "0.0000"), (-0.00004, "+0.0000"),
])
def test_format_like_reads_the_expected_string_as_printed(value, expected):
    assert claims.format_like(value, expected) == expected


def test_a_sequence_claim_names_each_entry_that_moved(capsys):
    claim("GRPO advantages", torch.tensor([0.866, -0.866]), ["+0.87", "-0.87"])
    assert capsys.readouterr().out == "✓ GRPO advantages = +0.87, -0.87\n"
    with pytest.raises(ClaimError, match=r"\(-0.87 -> -0.86\)"):
        claim("GRPO advantages", [0.866, -0.86], ["+0.87", "-0.87"])
    with pytest.raises(ValueError, match="2 strings"):
        claim("GRPO advantages", [0.866, -0.86], ["+0.87"])
