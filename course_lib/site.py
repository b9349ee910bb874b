"""The offline HTML edition: every chapter with its stored outputs, readable from disk with no network.

    python -m course_lib.site [OUT_DIR]        (what `make html` runs; OUT_DIR defaults to site/)

nbconvert's pages normally load the widget renderer, require.js and MathJax from a CDN. Here they come
from npm packages installed once into OUT_DIR/vendor/ (npm reaches its registry; the pages never reach
anything), so plots, LaTeX and the sliders' saved state render from file:// with the network off.
"""
from __future__ import annotations

import html
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NPM_PACKAGES = ("@jupyter-widgets/html-manager@1.0.15", "requirejs@2.3.7", "mathjax@2.7.7")
WIDGETS_JS = "vendor/node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js"
REQUIRE_JS = "vendor/node_modules/requirejs/require.js"
MATHJAX_JS = "vendor/node_modules/mathjax/MathJax.js?config=TeX-AMS_CHTML-full"


def install_vendor(out: Path) -> None:
    """npm-install the three front-end packages into out/vendor (skipped when already there)."""
    vendor = out / "vendor"
    if all((out / p.split("?")[0]).exists() for p in (WIDGETS_JS, REQUIRE_JS, MATHJAX_JS)):
        return
    if shutil.which("npm") is None:
        raise SystemExit("make html needs npm (Node.js) to fetch the widget renderer, require.js and MathJax")
    vendor.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", str(vendor), "--no-save", "--no-audit", "--no-fund",
                    "--silent", *NPM_PACKAGES], check=True)


# Without a kernel a saved slider could still be dragged while its output stays the same: on these pages
# every widget control is inert (no pointer, no key reaches it) and a note at the top says so.
STATIC_NOTE = (
    '<div class="course-static-note" style="margin: 8px auto; max-width: 1000px; padding: 6px 10px; '
    'border: 1px solid #c9b458; background: #fff8dc; font-family: sans-serif">Offline edition: the '
    'sliders show the values the chapter was run with and do not move; open the notebook in JupyterLab '
    '(<code>make lab</code>) to use them.</div>')
INERT_WIDGETS = """<style>
.jupyter-widgets .widget-slider, .jupyter-widgets .widget-dropdown, .jupyter-widgets .widget-checkbox,
.jupyter-widgets .widget-text, .jupyter-widgets input, .jupyter-widgets select {
  pointer-events: none; opacity: 0.75; }
</style>
<script>
for (const type of ["keydown", "keyup", "keypress", "pointerdown", "mousedown", "touchstart", "wheel"]) {
  document.addEventListener(type, e => {
    if (e.target instanceof Element && e.target.closest(".jupyter-widgets")) {
      e.stopPropagation(); e.preventDefault();
    }
  }, {capture: true, passive: false});
}
</script>"""


def make_static(body: str) -> str:
    """The page with its widget controls made inert and the note that says so under <body>."""
    head_end, body_start = body.index("</head>"), body.index("<body")
    body_open = body.index(">", body_start) + 1
    return (body[:head_end] + INERT_WIDGETS + "\n" + body[head_end:body_open] + STATIC_NOTE
            + body[body_open:])


def export(notebook: Path, out: Path) -> Path:
    """One chapter to out/<name>.html, its assets pointing at out/vendor/."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    cfg = Config()
    cfg.HTMLExporter.widget_renderer_url = WIDGETS_JS
    cfg.HTMLExporter.require_js_url = REQUIRE_JS
    cfg.HTMLExporter.mathjax_url = MATHJAX_JS
    cfg.TagRemovePreprocessor.remove_input_tags = {"remove-input"}   # a verdict's source: its text shows once
    body, _ = HTMLExporter(config=cfg).from_filename(str(notebook))
    target = out / (notebook.stem + ".html")
    target.write_text(make_static(body), encoding="utf-8")
    return target


def write_index(pages: list[Path], out: Path) -> Path:
    """out/index.html: a list of the chapters, titled by each notebook's first heading."""
    items = []
    for page in pages:
        nb = json.loads((ROOT / "notebooks" / (page.stem + ".ipynb")).read_text())
        first = "".join(nb["cells"][0]["source"]).splitlines()
        title = next((line.lstrip("# ").strip() for line in first if line.startswith("#")), page.stem)
        items.append(f'<li><a href="{page.name}">{html.escape(title)}</a></li>')
    index = out / "index.html"
    index.write_text("<!doctype html><meta charset='utf-8'><title>RL for LLMs by numerical experiment</title>"
                     "<h1>RL for LLMs by numerical experiment</h1><p>The chapters with their stored outputs "
                     "(offline edition: sliders show their saved state; run the notebooks in JupyterLab to "
                     "move them).</p><ul>" + "".join(items) + "</ul>", encoding="utf-8")
    return index


def build(out: Path = ROOT / "site", notebooks: list[Path] | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    install_vendor(out)
    notebooks = notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    pages = [export(nb, out) for nb in notebooks]
    write_index(pages, out)
    return pages


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "site"
    for page in build(target):
        print(page)
    print(target / "index.html")
