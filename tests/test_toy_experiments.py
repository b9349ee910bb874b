"""Chapter 07's comparisons: metric keys declared once and defined in the glossary, every registered
loss trained, and the stored result files reusable run by run (no retraining of a stored config)."""
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from course_lib import losses, metrics
from course_lib.toy.experiments import COMPARISONS, Comparison
from course_lib.toy.long_answers import LONG_COMPARISONS

EVERY = {**COMPARISONS, **LONG_COMPARISONS}

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "notebooks" / "data"


def test_every_comparison_declares_glossary_keys_led_by_its_tested_metric():
    for name, comp in EVERY.items():
        assert comp.keys and comp.keys[0] == comp.metric, name
        metrics.check_keys(comp.keys)                    # raises on a key the glossary lacks
    with pytest.raises(ValueError, match="must start with the tested metric"):
        Comparison(claim="c", metric="acc/heldout", variants={}, keys=("entropy/mean",))


def test_the_every_loss_comparison_trains_every_loss_and_every_estimator_the_trainer_runs():
    from course_lib.rl.config import CHOICES
    comp = COMPARISONS["all_losses"]
    trained = {kw["loss"] for kw in comp.variants.values()}
    assert trained == set(losses.available_losses()) | set(losses.framework_losses())
    estimators = {kw.get("adv_estimator", "grpo") for kw in comp.variants.values()}
    assert estimators == set(CHOICES["adv_estimator"])
    # each loss with GRPO's advantage, and each other estimator with GRPO's loss (GPG also with its own)
    for name in trained:
        assert comp.variants.get(name) == {"loss": name}, name
    others = [kw for kw in comp.variants.values() if kw.get("adv_estimator", "grpo") != "grpo"]
    assert all(kw["loss"] == "grpo" for kw in others if kw["adv_estimator"] != "gpg")
    assert {"loss": "gpg", "adv_estimator": "gpg"} in others


def test_each_stored_file_holds_exactly_its_comparisons_arms_and_seeds():
    for path in sorted(DATA.glob("toy_*.json")):
        name = path.stem[len("toy_"):]
        if name not in EVERY:
            continue                                     # e.g. toy_width_probe.json: not a comparison
        raw = json.loads(path.read_text())
        assert list(raw["runs"]) == list(EVERY[name].variants), name
        for label, hists in raw["runs"].items():
            assert [h["config"]["seed"] for h in hists] == raw["meta"]["seeds"], (name, label)


def _toy_results():
    spec = importlib.util.spec_from_file_location("toy_results", ROOT / "benchmarks" / "toy_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stored_copy(tmp_path, env):
    """toy_aggregation.json copied to tmp_path, marked as made in ``env``."""
    raw = json.loads((DATA / "toy_aggregation.json").read_text())
    raw["meta"]["environment"] = env
    (tmp_path / "toy_aggregation.json").write_text(json.dumps(raw))
    return raw


def test_toy_results_copies_stored_runs_instead_of_training_them(tmp_path, monkeypatch):
    from course_lib.rl.history import environment
    tr = _toy_results()
    before = _stored_copy(tmp_path, environment())
    def no_training(*args):
        raise AssertionError("a stored config was trained again")
    monkeypatch.setattr(tr, "_job", no_training)
    tr.main(["--only", "aggregation", "--out", str(tmp_path)])
    after = json.loads((tmp_path / "toy_aggregation.json").read_text())
    assert after["runs"] == before["runs"]
    assert len(after["meta"]["copied_from_stored_files"]) == 6
    assert all("toy_aggregation.json" in c for c in after["meta"]["copied_from_stored_files"])
    assert after["meta"]["environment"] == environment()


def test_toy_results_never_copies_a_run_made_in_another_environment(tmp_path):
    tr = _toy_results()
    _stored_copy(tmp_path, {"torch": "2.13.0+cpu", "cpu_capability": "some other CPU"})
    assert tr.stored_runs(str(tmp_path)) == {}


def test_a_cuda_run_is_never_copied_or_replayed_and_a_file_without_a_device_was_a_cpus(tmp_path):
    from course_lib.rl.history import environment, replays_here
    tr = _toy_results()
    here = environment()
    assert here["device"] == "cpu" and replays_here(here)
    old = {k: v for k, v in here.items() if k != "device"}          # made before the device was recorded
    assert replays_here(old)
    cuda = {**here, "device": "cuda:0", "gpu": "NVIDIA H200", "cuda": "12.8", "cudnn": 91000}
    assert not replays_here(cuda) and not replays_here(None)
    _stored_copy(tmp_path, cuda)                  # the same machine, but the run was made on its GPU
    assert tr.stored_runs(str(tmp_path)) == {}
    _stored_copy(tmp_path, old)
    assert len(tr.stored_runs(str(tmp_path))) == 6


@pytest.mark.parametrize("size", ["long", "long_gpu"])
def test_the_long_answer_comparisons_run_the_scratchpad_task_at_its_size(size):
    """Every arm at the size's budget (truncation: 8 tokens below it) and batch; the GPU size's comparisons
    differ from the stored ones only in the size's fields."""
    from course_lib.rl.config import SIZES, make_config
    from course_lib.toy.long_answers import long_comparisons
    comps = long_comparisons(size)
    assert set(comps) == set(LONG_COMPARISONS)
    for name, comp in comps.items():
        assert name not in COMPARISONS
        budget = SIZES[size]["max_new_tokens"] - (8 if name == "long_truncation" else 0)
        for label, cfg in comp.configs(make_config("smoke"), seed=0, steps=comp.steps).items():
            assert cfg.task == "scratchpad" and cfg.max_new_tokens == budget, (name, label)
            assert cfg.prompts_per_step == SIZES[size]["prompts_per_step"] and cfg.steps == 200, (name, label)
            assert cfg.d_model == SIZES[size].get("d_model", 64), (name, label)
    with pytest.raises(ValueError, match="size must be 'long' or 'long_gpu'"):
        long_comparisons("smoke")
