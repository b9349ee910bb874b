"""A run interrupted after a checkpoint and resumed from it logs the rows of the run that was not interrupted
(every value but the times), with a stale sampler, a learning-rate warm-up, dynamic sampling and minibatches in
play; the errors: a missing file named, another config's file refused with the fields that differ, a bad
``every``, a run on ranks."""
import pytest
import torch

from course_lib.rl.checkpoint import Checkpoint
from course_lib.rl.config import RunConfig
from course_lib.rl import train

TINY = RunConfig(steps=5, prompts_per_step=8, group_size=4, n_layer=1, d_model=32, n_head=2, warm_steps=300,
                 warm_target=None, warm_lr=1e-2, heldout_questions=64, eval_every=2, lr=3e-3, warmup_steps=3,
                 device="cpu", mismatch="stale", stale_steps=2, dynamic_sampling=True, minibatches=2)

pytestmark = pytest.mark.usefixtures("one_thread")      # tests/conftest.py


def _values(rows):
    """Every logged value but the clocks' (times, and speeds from them); NaN as a string, so that it equals NaN."""
    return [{k: "nan" if v != v else v for k, v in r.items() if not k.startswith(("time/", "speed/"))}
            for r in rows]


@pytest.fixture(scope="module")
def straight():
    return train(TINY, progress=False)


@pytest.mark.parametrize("every, stop", [(1, 2), (3, 3), (2, 3)])
def test_a_resumed_run_logs_the_rows_of_the_uninterrupted_one(straight, tmp_path, every, stop):
    path = tmp_path / "run.pt"
    first = train(TINY, progress=False, stop_after=stop, checkpoint=Checkpoint(path, every=every))
    assert _values(first.rows) == _values(straight.rows[: stop + 1])
    rest = train(TINY, progress=False, checkpoint=Checkpoint(path, resume=True))
    assert [r["step"] for r in rest.rows] == list(range(TINY.steps + 1))
    assert _values(rest.rows) == _values(straight.rows)
    for a, b in zip(rest.final_state.values(), straight.final_state.values()):
        assert a.equal(b)


def test_the_resumed_run_takes_nothing_from_its_own_warm_start(tmp_path, monkeypatch):
    """On another machine the warm start would round differently: the policy, the reference (under a KL
    term) and the stale sampler's weights all come from the file."""
    from course_lib.rl import trainer
    cfg = RunConfig(**{**TINY.__dict__, "kl_coef": 0.1})
    straight = train(cfg, progress=False)
    path = tmp_path / "run.pt"
    train(cfg, progress=False, stop_after=3, checkpoint=Checkpoint(path))
    real = trainer.initial_policy

    def other_rounding(*args, **kwargs):
        model, state, seconds = real(*args, **kwargs)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.01)
        return model, {k: v.clone() for k, v in model.state_dict().items()}, seconds

    monkeypatch.setattr(trainer, "initial_policy", other_rounding)
    rest = train(cfg, progress=False, checkpoint=Checkpoint(path, resume=True))
    assert _values(rest.rows) == _values(straight.rows)


def test_every_sets_which_steps_are_written(tmp_path, monkeypatch):
    from course_lib.rl import trainer
    steps = []
    real = trainer.save_checkpoint
    monkeypatch.setattr(trainer, "save_checkpoint", lambda ckpt, **kw: (steps.append(kw["step"]), real(ckpt, **kw)))
    train(TINY, progress=False, checkpoint=Checkpoint(tmp_path / "c.pt", every=2))
    assert steps == [2, 4, 5]


def test_resuming_from_a_missing_file_names_it(tmp_path):
    missing = tmp_path / "nowhere" / "run.pt"
    with pytest.raises(FileNotFoundError, match="resume=True but the checkpoint file .*nowhere/run.pt"):
        train(TINY, progress=False, checkpoint=Checkpoint(missing, resume=True))


def test_another_configs_checkpoint_is_refused_with_the_fields_that_differ(tmp_path):
    path = tmp_path / "run.pt"
    train(TINY, progress=False, stop_after=1, checkpoint=Checkpoint(path))
    other = RunConfig(**{**TINY.__dict__, "lr": 1e-3})
    with pytest.raises(ValueError, match=r"another config: lr 0\.003 there, 0\.001 here"):
        train(other, progress=False, checkpoint=Checkpoint(path, resume=True))


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_every_must_be_a_positive_int(every):
    with pytest.raises(ValueError, match="every must be an int >= 1"):
        Checkpoint("x.pt", every=every)


def test_a_run_on_ranks_is_not_checkpointed(tmp_path):
    cfg = RunConfig(**{**TINY.__dict__, "world_size": 2, "dynamic_sampling": False})
    with pytest.raises(ValueError, match="world_size must be 1"):
        train(cfg, progress=False, checkpoint=Checkpoint(tmp_path / "c.pt"))
