"""Shared pieces of the peers tests: verl's own config composed with Hydra, TRL's GRPOConfig, OpenRLHF's
own argument parser, and the stored records chapter 09 reads.

Everything here imports the frameworks lazily, inside fixtures: without the peers environment each test
module skips itself (pytest.importorskip with REASON) and nothing here runs.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

REASON = ("needs the peers environment (verl 0.9.1, TRL 1.16.0, OpenRLHF 0.11.2 in .venv-peers): "
          "`make peers` builds it and runs tests/peers there")

# What the machine adds to every translation so that the frameworks' own checks can run: a cluster
# size for verl's batch arithmetic, micro-batch sizes it insists on, the rollout engine (verl reads it to
# check a LoRA rank; vllm's check imports vLLM, which the peers venv lacks), and for TRL a CPU with bf16 off.
VERL_MACHINE = ["trainer.n_gpus_per_node=8", "trainer.nnodes=1",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
                "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
                "actor_rollout_ref.rollout.name=sglang"]
TRL_MACHINE = {"use_cpu": True, "bf16": False, "output_dir": "unused-peers-output", "report_to": []}
OPENRLHF_MACHINE = ["--actor.model_name_or_path", "unused", "--reward.remote_url", "unused"]


@pytest.fixture(scope="session")
def verl_compose():
    """overrides -> verl's ppo_trainer config, composed by Hydra in struct mode (an unknown key fails)."""
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        yield lambda overrides: compose("ppo_trainer", overrides=list(overrides))
    GlobalHydra.instance().clear()


def _main_block(path: Path) -> tuple[list, list]:
    """A script's standard-library imports and the statements under its `if __name__ == "__main__":`,
    as AST nodes."""
    tree = ast.parse(path.read_text())
    stdlib = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and all(
        (a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0] in sys.stdlib_module_names
        for a in n.names)]
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return stdlib, node.body
    raise AssertionError(f"{path} has no __main__ block")


@pytest.fixture(scope="session")
def openrlhf_cli():
    """OpenRLHF's own parser and its argument checks, run from its installed train_ppo_ray.py.

    The script builds its parser under `if __name__ == "__main__"` and imports Ray and DeepSpeed at the
    top, so the test executes that block's statements (OpenRLHF's code, unchanged) up to
    `parser.parse_args()` to get the parser, and the checks after it, before `train(args)`, as a
    function of the parsed arguments."""
    spec = importlib.util.find_spec("openrlhf")
    script = Path(spec.origin).parent / "cli" / "train_ppo_ray.py"
    imports, body = _main_block(script)
    cut = next(i for i, n in enumerate(body) if "parse_args" in ast.unparse(n))
    env = {"__name__": "openrlhf_cli"}
    exec(compile(ast.Module(imports + body[:cut], []), str(script), "exec"), env)
    parser = env["parser"]
    rest = body[cut + 1:]
    stop = next(i for i, n in enumerate(rest) if "use_ms" in ast.unparse(n) or "train(args)" in ast.unparse(n))
    checks = [n for n in rest[:stop] if "hierarchize" not in ast.unparse(n)]
    hier_spec = importlib.util.spec_from_file_location("openrlhf_config", Path(spec.origin).parent / "utils" / "config.py")
    hier = importlib.util.module_from_spec(hier_spec)
    hier_spec.loader.exec_module(hier)
    code = compile(ast.Module(checks, []), str(script), "exec")

    def validate(argv):
        args = hier.hierarchize(parser.parse_args(argv))
        exec(code, {**env, "args": args, "print": lambda *a, **k: None})
        return args
    return parser, validate


def trl_source_block(marker: str, assigns: str):
    """The first `if` statement of TRL's GRPOTrainer source (in source order) whose condition is
    ``marker`` and whose body assigns ``assigns``, compiled (TRL's code, unchanged), to run on crafted
    tensors."""
    import trl.trainer.grpo_trainer as gt
    tree = ast.parse(Path(gt.__file__).read_text())
    found = sorted((node for node in ast.walk(tree) if isinstance(node, ast.If)
                    and ast.unparse(node.test) == marker
                    and any(isinstance(t, ast.Name) and t.id == assigns
                            for n in ast.walk(node) if isinstance(n, ast.Assign) for t in n.targets)),
                   key=lambda node: node.lineno)
    assert found, f"no `if {marker}` assigning {assigns} in {gt.__file__}"
    return compile(ast.Module([found[0]], []), gt.__file__, "exec")


def write_record(name: str, data: dict) -> None:
    """With PEERS_RECORD_DIR set (make peers), store a record for chapter 09 there."""
    folder = os.environ.get("PEERS_RECORD_DIR")
    if folder:
        with open(Path(folder) / name, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
