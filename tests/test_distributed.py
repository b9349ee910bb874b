"""course_lib.rl.distributed: DDP on gloo with 2 and 4 CPU processes gives the full batch's gradient.

One process group per world size runs every check (process start-up dominates the cost); every
run's processes are gone afterwards, also when a rank raises or hangs.
"""
import os
import time

import pytest
import torch

from course_lib.rl import distributed as D
from course_lib.rl import split as S

WORLD_SIZES = (2, 4)
NAIVE = [s for s in S.STRATEGIES if s != "exact"]


def _naive_cases(world_size):
    g = torch.Generator().manual_seed(10 + world_size)
    return [D.GradCase("grpo", mode, tuple(map(tuple, S.random_split(16, world_size, 3, g).sizes())), s)
            for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm") for s in NAIVE]


@pytest.fixture(scope="module")
def runs():
    batch = D.make_batch(3)
    out, full = {}, {}
    for R in WORLD_SIZES:
        exact, naive = D.every_loss_cases(R, seed=R), _naive_cases(R)
        grads, stds = D.ddp_gradients(batch, exact + naive, R, timeout_s=240)
        out[R] = (exact, naive, grads[:len(exact)], grads[len(exact):], stds)
        for c in exact + naive:
            if (c.loss, c.mode) not in full:
                full[c.loss, c.mode] = D.full_batch_gradient(batch, c.loss, c.mode)
    return batch, out, full


def test_every_loss_cases_cover_every_splittable_loss_mode_and_one_to_four_micro_batches():
    cases = D.every_loss_cases(4)
    from course_lib.aggregation import MODES
    from course_lib.losses import FRAMEWORK_LOSSES, LOSSES
    assert {c.loss for c in cases} == set(LOSSES) | set(FRAMEWORK_LOSSES) - set(S.BATCH_STATISTIC_LOSSES)
    assert {c.mode for c in cases} == set(MODES)
    assert {len(c.sizes[0]) for c in cases} == {1, 2, 3, 4}
    assert any(0 in rank for c in cases for rank in c.sizes)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_ddp_over_ranks_and_micro_batches_gives_the_full_batch_gradient(runs, world_size):
    _, out, full = runs
    exact, _, grads, _, _ = out[world_size]
    for case, grad in zip(exact, grads):
        want = full[case.loss, case.mode]
        torch.testing.assert_close(grad, want, rtol=0, atol=1e-12, msg=lambda m: f"{case}: {m}")


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_ddp_reproduces_each_naive_split_of_the_one_process_simulation(runs, world_size):
    batch, out, full = runs
    _, naive, _, grads, _ = out[world_size]
    for case, grad in zip(naive, grads):
        torch.testing.assert_close(grad, D.one_process_gradient(batch, case), rtol=0, atol=1e-12)
        applies = case.strategy != "L_max = piece padding" or "norm" in case.mode
        assert (float((grad - full[case.loss, case.mode]).abs().max()) > 1e-6) == applies, case


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_batch_std_from_all_reduced_moments_is_the_full_batch_std_on_every_rank(runs, world_size):
    batch, out, _ = runs
    stds = out[world_size][4]
    assert len(stds) == world_size
    assert max(abs(s - float(batch["rewards"].std())) for s in stds) < 1e-13


def test_one_process_gradient_of_the_exact_rule_is_the_full_batch_gradient():
    batch = D.make_batch(1)
    for case in D.every_loss_cases(3, seed=1)[::7]:
        torch.testing.assert_close(D.one_process_gradient(batch, case),
                                   D.full_batch_gradient(batch, case.loss, case.mode), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- clean-up
def _pids_gone(pids, wait_s=10.0):
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def _note_pid(rank, folder):
    with open(os.path.join(folder, f"{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))


def fail_on_rank_one(rank, world_size, folder):
    _note_pid(rank, folder)
    if rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    time.sleep(300)                              # rank 0 would outlive the run if nobody ended it
    return rank


def hang_on_rank_one(rank, world_size, folder):
    _note_pid(rank, folder)
    if rank == 1:
        time.sleep(300)
    return rank


def _pids(folder, n):
    deadline = time.monotonic() + 10
    while len(os.listdir(folder)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return [int(open(os.path.join(folder, f)).read()) for f in os.listdir(folder)]


def test_a_rank_that_raises_is_reported_and_every_process_ends(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(Exception, match="rank 1 fails on purpose"):
        D.run_ranks(fail_on_rank_one, 2, str(tmp_path), timeout_s=60)
    assert time.monotonic() - t0 < 30
    pids = _pids(str(tmp_path), 2)
    assert len(pids) == 2 and _pids_gone(pids)


def test_a_rank_that_hangs_times_out_and_every_process_ends(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish within 3 s"):
        D.run_ranks(hang_on_rank_one, 2, str(tmp_path), timeout_s=3)
    assert time.monotonic() - t0 < 30
    pids = _pids(str(tmp_path), 2)
    assert len(pids) == 2 and _pids_gone(pids)


def test_run_ranks_returns_each_ranks_result_in_rank_order(tmp_path):
    assert D.run_ranks(hang_on_rank_one, 1, str(tmp_path), timeout_s=60) == [0]
