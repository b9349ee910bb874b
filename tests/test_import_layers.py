"""Imports in course_lib point one way: no module imports, directly or through others, a module that
imports it back. Read statically from the source (ast), so an import inside a function, the kind that
hides a cycle at import time, counts like any other; a planted cycle in a throw-away package shows
that the search finds one."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules(package_dir: Path) -> dict[str, Path]:
    """Dotted name -> file, for every .py file under the package (a package is its __init__)."""
    base = package_dir.parent
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    parts = parts[: len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere in its file (functions included)."""
    modules = _modules(package_dir)
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(name, node, package)
                for a in node.names:            # `from pkg import mod` imports the module mod
                    found.add(f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_parent_package(a: str, b: str) -> bool:
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_course_lib_has_no_import_cycle():
    graph = import_graph(ROOT / "course_lib")
    # a package's __init__ re-exporting its own modules is not a layer pointing back
    graph = {m: {d for d in deps if not _is_parent_package(m, d)} for m, deps in graph.items()}
    assert len(graph) > 40
    assert "course_lib.rl.trainer" in graph["course_lib.rl.distributed"]     # the graph is read
    assert not import_cycles(graph), import_cycles(graph)


def test_a_planted_cycle_hidden_in_a_function_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .sub import high   # lazy: invisible at import\n")
    (pkg / "sub" / "high.py").write_text("from .. import low\nfrom ..low import f\n")
    (pkg / "other.py").write_text("import pkg.low\n")
    graph = import_graph(pkg)
    assert graph["pkg.low"] == {"pkg.sub.high"} and graph["pkg.sub.high"] == {"pkg.low"}
    assert import_cycles(graph) == [["pkg.low", "pkg.sub.high"]]


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for d in graph[todo.pop()] - seen:
            seen.add(d)
            todo.append(d)
    return seen


TOY_STUDIES = ["course_lib.toy.experiments", "course_lib.toy.curves", "course_lib.toy.diagnosis",
               "course_lib.toy.fingerprint", "course_lib.toy.long_answers", "course_lib.toy.scaling"]


def _plug_in_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """rl module -> the toy's or the real model's modules it imports (anywhere in its file)."""
    plug_in = lambda m: m.split(".")[:2] in (["course_lib", "toy"], ["course_lib", "lm"])   # noqa: E731
    return {m: sorted(d for d in deps if plug_in(d)) for m, deps in graph.items()
            if (m == "course_lib.rl" or m.startswith("course_lib.rl.")) and any(plug_in(d) for d in deps)}


def test_the_trainer_imports_no_plug_in_and_reaches_no_study():
    """course_lib.rl owns the seam (``rl.policy``, ``rl.task``, ``rl.registry``): it imports nothing from the
    toy or the real model, which import its interfaces and register by name; and it reaches none of the toy's
    studies (which run it)."""
    graph = import_graph(ROOT / "course_lib")
    rl = {m for m in graph if m == "course_lib.rl" or m.startswith("course_lib.rl.")}
    assert {"course_lib.rl.trainer", "course_lib.rl.policy", "course_lib.rl.registry"} <= rl
    assert "course_lib.rl.policy" in graph["course_lib.toy.policy"] & graph["course_lib.lm.policy"]
    assert not _plug_in_imports(graph), _plug_in_imports(graph)
    for m in sorted(rl):
        assert not _reach(graph, m) & set(TOY_STUDIES), (m, sorted(_reach(graph, m) & set(TOY_STUDIES)))


def test_a_planted_import_of_a_plug_in_is_found(tmp_path):
    """The same reading on a copy of course_lib with one import, hidden in a function, planted in rl."""
    import shutil
    copy = tmp_path / "course_lib"
    shutil.copytree(ROOT / "course_lib", copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    loop = copy / "rl" / "samplers.py"
    loop.write_text(loop.read_text() + "\n\ndef _planted():\n    from ..toy.task import AdditionTask\n")
    assert _plug_in_imports(import_graph(copy)) == {"course_lib.rl.samplers": ["course_lib.toy.task"]}
