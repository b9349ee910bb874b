"""course_lib.corrections: TIS weights and MIS masks, token and sequence level."""
import math

import pytest
import torch

import reference as ref
from batches import DTYPES, POISONS, SEEDS, make_batch, poison, tol
from course_lib import corrections as C

LEVELS = ("token", "sequence")


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_tis_and_mis_weights_match_reference(seed, dtype):
    bt = make_batch(seed, dtype, holes=True)
    mask = bt["mask"]
    # small rollout offsets for the sequence level, so products land on both sides of the cap
    rollout_seq = bt["old_logp"] + 0.3 * (bt["rollout_logp"] - bt["old_logp"])
    for level, rollout in (("token", bt["rollout_logp"]), ("sequence", rollout_seq)):
        for kind, fn in (("tis", C.tis_weights), ("mis", C.mis_weights)):
            for cap in (2.0, 1.2, 5.0):
                got = fn(bt["old_logp"], rollout, mask, cap=cap, level=level)
                expected = ref.correction_weights(kind, bt["old_logp"].tolist(), rollout.tolist(),
                                                  mask.tolist(), cap, level)
                torch.testing.assert_close(got.double(), _t(expected), **tol(dtype))
                assert got.dtype == dtype
                assert torch.equal(got, C.correction_weights(kind, bt["old_logp"], rollout, mask, cap, level))


def test_tis_truncates_and_mis_drops_above_the_cap():
    old = torch.log(torch.tensor([[0.5, 0.3, 0.9]], dtype=torch.float64))
    rollout = torch.log(torch.tensor([[0.5, 0.1, 0.3]], dtype=torch.float64))   # rho = 1, 3, 3
    mask = torch.tensor([[True, True, False]])
    assert C.tis_weights(old, rollout, mask, cap=2.0)[0].tolist() == pytest.approx([1.0, 2.0, 0.0])
    assert C.mis_weights(old, rollout, mask, cap=2.0)[0].tolist() == pytest.approx([1.0, 0.0, 0.0])
    # sequence level: rho_seq = 1 * 3 = 3 for both valid tokens; padding contributes nothing
    tis_seq = C.tis_weights(old, rollout, mask, cap=2.0, level="sequence")
    assert tis_seq[0].tolist() == pytest.approx([2.0, 2.0, 0.0])
    mis_seq = C.mis_weights(old, rollout, mask, cap=5.0, level="sequence")
    assert mis_seq[0].tolist() == pytest.approx([3.0, 3.0, 0.0])
    assert C.mis_weights(old, rollout, mask, cap=2.0, level="sequence").tolist() == [[0.0, 0.0, 0.0]]


def test_correction_weights_carry_no_gradient():
    bt = make_batch(0, torch.float32)
    old = bt["old_logp"].clone().requires_grad_(True)
    rollout = bt["rollout_logp"].clone().requires_grad_(True)
    for kind in ("tis", "mis"):
        for level in LEVELS:
            assert not C.correction_weights(kind, old, rollout, bt["mask"], level=level).requires_grad


@pytest.mark.parametrize("kind", POISONS)
def test_poisoned_padding_does_not_change_weights(kind):
    bt = make_batch(1, torch.float32, holes=True)
    mask = bt["mask"]
    for fn in (C.tis_weights, C.mis_weights):
        for level in LEVELS:
            clean = fn(bt["old_logp"], bt["rollout_logp"], mask, level=level)
            bad = fn(poison(bt["old_logp"], mask, kind), poison(bt["rollout_logp"], mask, kind, seed=5),
                     mask, level=level)
            assert torch.equal(clean, bad) and torch.all(bad[~mask] == 0)


def test_none_correction_returns_none():
    bt = make_batch(0)
    assert C.correction_weights("none", bt["old_logp"], bt["rollout_logp"], bt["mask"]) is None


def test_correction_bad_input_names_the_argument():
    bt = make_batch(0)
    old, rollout, mask = bt["old_logp"], bt["rollout_logp"], bt["mask"]
    with pytest.raises(ValueError, match=r"level must be one of \('token', 'sequence'\), got 'batch'"):
        C.tis_weights(old, rollout, mask, level="batch")
    with pytest.raises(ValueError, match="level must be one of"):
        C.correction_weights("mis", old, rollout, mask, level="seq")
    with pytest.raises(ValueError, match=r"kind must be one of \['mis', 'none', 'tis'\], got 'icepop'"):
        C.correction_weights("icepop", old, rollout, mask)
    for cap in (0.0, -1.0, "2", True):
        with pytest.raises(ValueError, match="cap must be a number > 0"):
            C.mis_weights(old, rollout, mask, cap=cap)
    with pytest.raises(ValueError, match="mask must be a bool"):
        C.tis_weights(old, rollout, mask.float())
    with pytest.raises(ValueError, match="mask must have the shape of old_logp"):
        C.tis_weights(old, rollout, mask[:, :-1])
    with pytest.raises(ValueError, match="rollout_logp must have the shape of old_logp"):
        C.tis_weights(old, rollout[:, :-1], mask)
    with pytest.raises(ValueError, match="rollout_logp must be a torch.Tensor"):
        C.tis_weights(old, rollout.tolist(), mask)


def test_sequence_level_clamps_the_summed_log_rho_once_at_plus_minus_20():
    """Pinned: the clamp applies to the row's sum of token log-ratios, after summing.

    Row 0: token log rho 15 and 10 -> 25 -> rho = e^20 (TIS: the cap; MIS: dropped under a cap
    below e^20, kept as e^20 under a cap above). Row 1: -15 and -10 -> e^-20, not 0 and not e^-25.
    Row 2: 30 and -15 -> e^15; clamping each token first would give e^(20 - 15) = e^5.
    """
    log_rho = torch.tensor([[15.0, 10.0, 0.0], [-15.0, -10.0, 0.0], [30.0, -15.0, 0.0]], dtype=torch.float64)
    rollout = torch.full_like(log_rho, -30.0)
    old = rollout + log_rho
    mask = torch.tensor([[True, True, False]] * 3)
    e = math.exp
    tis = C.tis_weights(old, rollout, mask, cap=2.0, level="sequence")
    assert tis[:, 0].tolist() == pytest.approx([2.0, e(-20), 2.0], rel=1e-12)
    mis = C.mis_weights(old, rollout, mask, cap=2.0, level="sequence")
    assert mis[:, 0].tolist() == pytest.approx([0.0, e(-20), 0.0], rel=1e-12)
    mis_high_cap = C.mis_weights(old, rollout, mask, cap=1e9, level="sequence")
    assert mis_high_cap[:, 0].tolist() == pytest.approx([e(20), e(-20), e(15)], rel=1e-12)
    assert torch.equal(mis_high_cap[:, 1], mis_high_cap[:, 0]) and torch.all(mis_high_cap[:, 2] == 0)
    # token level clamps each token on its own: 30 -> 20
    tis_tok = C.tis_weights(old, rollout, mask, cap=1e9, level="token")
    assert tis_tok[2, :2].tolist() == pytest.approx([e(20), e(-15)], rel=1e-12)
    # and the loop reference agrees on all of it
    expected = ref.correction_weights("mis", old.tolist(), rollout.tolist(), mask.tolist(), 1e9, "sequence")
    torch.testing.assert_close(mis_high_cap, _t(expected), rtol=1e-12, atol=0)
