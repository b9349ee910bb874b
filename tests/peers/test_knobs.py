"""frameworks.KNOBS and frameworks.METRICS against the installed frameworks: every setting exists, every
stated default is the installed default, every metric name is one the framework logs, and the versions
are the ones the tables name. With PEERS_RECORD_DIR set, what was read is stored in
framework_defaults.json, which tests/test_frameworks.py compares with KNOBS where the frameworks are
not installed, and chapter 09 prints.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
from pathlib import Path

import pytest

from conftest import REASON, write_record

pytest.importorskip("trl", reason=REASON)
pytest.importorskip("verl", reason=REASON)
pytest.importorskip("openrlhf", reason=REASON)
from omegaconf import OmegaConf                                     # noqa: E402
from trl import GRPOConfig                                          # noqa: E402

from course_lib import frameworks as fw                             # noqa: E402

MISSING = object()
# where each framework's logged names are written: TRL's trainer inherits transformers' Trainer logging
# (the gradient norm), so its source is read too
PACKAGES = {"verl": (("verl", "**/*.py"),), "TRL": (("trl", "**/*.py"), ("transformers", "trainer*.py")),
            "OpenRLHF": (("openrlhf", "**/*.py"),)}


def _plain(value):
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    return list(value) if isinstance(value, tuple) else value


@pytest.fixture(scope="module")
def installed(verl_compose, openrlhf_cli):
    """(framework, setting name) -> the installed default (MISSING when the name does not exist)."""
    base = verl_compose([])
    trl_fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    parser, _ = openrlhf_cli
    import trl
    import trl.rewards

    def verl(name):
        if name.startswith("+"):                    # a key the base config must lack (Hydra adds it)
            present = OmegaConf.select(base, fw.verl_key(name), default=MISSING) is not MISSING
            return "present although written with +" if present else None
        return _plain(OmegaConf.select(base, fw.verl_key(name), default=MISSING))

    def trl_default(name):
        if name in trl_fields:
            f = trl_fields[name]
            return _plain(f.default_factory() if f.default is dataclasses.MISSING else f.default)
        found = hasattr(trl, name) or hasattr(trl.rewards, name)
        return None if found else MISSING

    def openrlhf(name):
        action = parser._option_string_actions.get(name)
        return MISSING if action is None else _plain(action.default)

    read = {"verl": verl, "TRL": trl_default, "OpenRLHF": openrlhf}
    return {(fwk, s.name): read[fwk](s.name) for k in fw.KNOBS for fwk, ss in k.settings().items() for s in ss}


@pytest.fixture(scope="module")
def logged_names():
    """framework -> every string constant in its installed source (f-string parts included)."""
    out = {}
    for framework, packages in PACKAGES.items():
        names = set()
        for package, pattern in packages:
            root = Path(importlib.import_module(package).__file__).parent
            for path in root.glob(pattern):
                try:
                    tree = ast.parse(path.read_text(errors="replace"))
                except SyntaxError:
                    continue
                names.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                             and isinstance(n.value, str) and len(n.value) < 80)
        out[framework] = names
    return out


def logged(name: str, names: set) -> bool:
    """The name is a constant of the source, or a constant prefix ('actor/') plus a constant key."""
    if name in names:
        return True
    head, _, tail = name.partition("/")
    return bool(tail) and head + "/" in names and tail in names


def test_versions_are_the_ones_the_tables_name():
    got = {f: importlib.metadata.version(p) for f, p in
           {"verl": "verl", "TRL": "trl", "OpenRLHF": "openrlhf"}.items()}
    assert got == fw.VERSIONS


def test_every_setting_exists_with_its_stated_default(installed):
    bad = []
    for knob in fw.KNOBS:
        for framework, settings in knob.settings().items():
            for s in settings:
                got = installed[(framework, s.name)]
                if got is MISSING:
                    bad.append(f"{framework} {s.name}: no such setting")
                elif s.default is not None and _plain(fw.stated_default(s)) != got:
                    bad.append(f"{framework} {s.name}: installed default {got!r}, course states {s.default}")
                elif s.default is None and s.name.startswith("+") and got is not None:
                    bad.append(f"{framework} {s.name}: {got}")
    assert bad == []


def test_openrlhf_choices_the_table_lists_are_the_parsers(openrlhf_cli):
    import re
    parser, _ = openrlhf_cli
    for knob in fw.KNOBS:
        for s in knob.openrlhf:
            action = parser._option_string_actions[s.name]
            for value in re.findall(r"`([^`]+)`", s.values or ""):
                assert action.choices and value in action.choices, f"{s.name}: {value}"


def test_every_metric_name_is_logged_by_its_framework(logged_names):
    bad = [f"{framework} {name}" for m in fw.METRICS for framework, names in m.settings().items()
           for name in names if not logged(name, logged_names[framework])]
    assert bad == []
    assert not logged("actor/pg_clip_fraction", logged_names["verl"])          # the check can fail


def _compared_constants(fn, name: str) -> list[str]:
    """The string constants a function's source compares ``name`` (an attribute or variable) with,
    in source order: `x == "a"`, `x in ["b", "c"]` -> ['a', 'b', 'c']."""
    import inspect
    import textwrap
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and ast.unparse(node.left).split(".")[-1] == name:
            for comp in node.comparators:
                for c in ast.walk(comp):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value not in out:
                        out.append(c.value)
    return out


@pytest.fixture(scope="module")
def selectable(openrlhf_cli):
    """setting -> every name the installed framework selects with it, read from its code."""
    from trl import GRPOTrainer
    from verl.trainer.ppo import core_algos as ca
    parser, _ = openrlhf_cli
    return {
        "verl actor.policy_loss.loss_mode": sorted(ca.POLICY_LOSS_REGISTRY),
        "verl algorithm.adv_estimator": sorted(e.value for e in ca.AdvantageEstimator),
        "verl actor.loss_agg_mode": sorted(_compared_constants(ca.agg_loss, "loss_agg_mode")),
        "TRL loss_type": sorted(_compared_constants(GRPOTrainer._compute_loss, "loss_type")),
        "TRL importance_sampling_level": sorted(_compared_constants(GRPOTrainer._compute_loss,
                                                                    "importance_sampling_level")),
        "OpenRLHF --algo.advantage.estimator": sorted(parser._option_string_actions["--algo.advantage.estimator"].choices),
        "OpenRLHF --actor.policy_loss_type": sorted(parser._option_string_actions["--actor.policy_loss_type"].choices),
    }


def test_the_tables_list_every_name_each_framework_selects(selectable):
    stated = {key: set() for key in selectable}               # a setting may appear in several rows
    for k in fw.KNOBS:
        for framework, ss in k.settings().items():
            for s in ss:
                stated.get(f"{framework} {s.name}", set()).update(fw.listed(s.values))
    assert {key: sorted(names) for key, names in stated.items()} == selectable
    assert len(selectable["verl actor.policy_loss.loss_mode"]) == 12 and "token-sum" in selectable[
        "verl actor.loss_agg_mode"] and "vespo" in selectable["TRL loss_type"]        # the readers can fail
    for key, table in (("verl actor.policy_loss.loss_mode", "verl loss_mode"),
                       ("verl algorithm.adv_estimator", "verl adv_estimator"),
                       ("verl actor.loss_agg_mode", "verl loss_agg_mode"), ("TRL loss_type", "TRL loss_type")):
        assert sorted(fw.COURSE_FUNCTIONS[table]) == selectable[key], key


def test_store_what_was_read(installed, logged_names, selectable):
    write_record("framework_defaults.json", {
        "versions": {f: importlib.metadata.version(p) for f, p in
                     {"verl": "verl", "TRL": "trl", "OpenRLHF": "openrlhf"}.items()},
        "defaults": {f"{framework} {name}": (None if value is MISSING else value)
                     for (framework, name), value in installed.items()},
        "choices": selectable,
        "metrics": sorted(f"{framework} {name}" for m in fw.METRICS for framework, names in m.settings().items()
                          for name in names if logged(name, logged_names[framework]))})
