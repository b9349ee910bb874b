"""Measure what each chapter costs to run: wall time and peak memory under the course's nbval check.

    python benchmarks/chapter_costs.py                  # print the table
    python benchmarks/chapter_costs.py --write-readme   # also replace the table in README.md and
                                                        # each chapter's "Run time" line
    python benchmarks/chapter_costs.py --sync-headers   # only copy the README's figures into the
                                                        # chapters' "Run time" lines (no measuring)

Each chapter runs alone, as `make test` runs it (pytest --nbval, a fresh kernel), in its own process,
so the peak resident memory reported is the largest process of that run (the kernel, normally).
`make costs` runs the second form.
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- chapter-costs:start -->", "<!-- chapter-costs:end -->"

# Runs one notebook and reports the peak RSS of its descendants (Linux: kilobytes) as JSON.
_CHILD = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(json.dumps({"rc": rc, "wall_s": time.perf_counter() - t0,
                  "peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def measure(notebook: Path) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(notebook), "--nbval",
           "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), "--nbval-current-env"]
    out = subprocess.run([sys.executable, "-c", _CHILD, *cmd], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    return json.loads(out.stdout)


def render(rows: list[tuple[str, dict]]) -> str:
    lines = ["| chapter | wall time under `make test` | peak memory | nbval |", "|---|---:|---:|---|"]
    for name, m in rows:
        lines.append(f"| `{name}` | {m['wall_s']:.0f} s | {m['peak_kb'] / 1024:.0f} MB | "
                     f"{'passes' if m['rc'] == 0 else 'FAILS'} |")
    total = sum(m["wall_s"] for _, m in rows)
    lines.append("")
    import torch
    from course_lib.rl.history import cpu_model
    lines.append(f"Measured {time.strftime('%Y-%m-%d')} by `make costs` on {cpu_model()} (PyTorch capability "
                 f"{torch.backends.cpu.get_cpu_capability()}), {_cores()} cores, Python {platform.python_version()}; "
                 f"all chapters together "
                 f"{total:.0f} s. Each figure includes starting a fresh kernel (about 2 s).")
    return "\n".join(lines)


def replace_block(text: str, table: str) -> str:
    """README text with the block between the two markers replaced by ``table``."""
    if START not in text or END not in text:
        raise ValueError(f"README.md has no {START} ... {END} block")
    return re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: START + "\n" + table + "\n" + END,
                  text, flags=re.S)


RUN_TIME = re.compile(r"(\*\*Run time\.\*\* About )(\d+)( s )")


def readme_seconds(text: str) -> dict[str, int]:
    """{notebook name: whole seconds} from the README's cost table (the one source of run times)."""
    block = text[text.index(START):text.index(END)]
    return {name: int(sec) for name, sec in re.findall(r"^\| `(\S+\.ipynb)` \| (\d+) s \|", block, re.M)}


def header_seconds(notebook: Path) -> int | None:
    """The seconds a chapter's header states ("**Run time.** About N s ..."), or None."""
    m = RUN_TIME.search(notebook.read_text(encoding="utf-8"))
    return int(m.group(2)) if m else None


def sync_header(notebook: Path, seconds: int) -> bool:
    """Set the chapter's stated run time to ``seconds`` (a markdown line: no output changes)."""
    text = notebook.read_text(encoding="utf-8")
    new = RUN_TIME.sub(lambda m: f"{m.group(1)}{seconds}{m.group(3)}", text, count=1)
    if new != text:
        notebook.write_text(new, encoding="utf-8")
    return new != text


def sync_headers(readme_text: str, paths: list[Path]) -> None:
    figures = readme_seconds(readme_text)
    for p in paths:
        if p.name in figures and header_seconds(p) is not None and sync_header(p, figures[p.name]):
            print(f"{p.name}: header now says about {figures[p.name]} s")


def _cores() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-readme", action="store_true",
                    help="replace the table in README.md and the chapters' stated run times")
    ap.add_argument("--sync-headers", action="store_true",
                    help="only copy the README's figures into the chapters' stated run times")
    ap.add_argument("notebooks", nargs="*", help="default: every notebooks/NN_*.ipynb")
    args = ap.parse_args()
    paths = [Path(p) for p in args.notebooks] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.sync_headers:
        sync_headers((ROOT / "README.md").read_text(), paths)
        return 0
    rows = []
    for p in paths:
        m = measure(p.resolve())
        print(f"{p.name:40s} {m['wall_s']:6.1f} s {m['peak_kb'] / 1024:7.0f} MB  rc={m['rc']}", flush=True)
        rows.append((p.name, m))
    table = render(rows)
    print(table)
    if args.write_readme:
        readme = ROOT / "README.md"
        readme.write_text(replace_block(readme.read_text(), table))
        sync_headers(readme.read_text(), paths)
    return 0 if all(m["rc"] == 0 for _, m in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
