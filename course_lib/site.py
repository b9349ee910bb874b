"""The offline HTML edition: every chapter with its stored outputs, readable from disk with no network.

    python -m course_lib.site [OUT_DIR]        (what `make html` runs; OUT_DIR defaults to site/)

nbconvert's pages normally load the widget renderer, require.js and MathJax from a CDN. Here they come
from npm packages installed once into OUT_DIR/vendor/ (npm reaches its registry; the pages never reach
anything), so plots, LaTeX and the sliders' saved state render from file:// with the network off.
"""
from __future__ import annotations

import html
import shutil
import subprocess
import sys
from pathlib import Path

from .display import chapter_index

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


# JupyterLab sets widgets in its UI font and a panel's table in its code font and line height; the widget
# renderer these pages load names no font (slider labels, read-outs and drop-downs fell back to the
# browser's serif) and gives an HTML widget a 28 px line (a table was double-spaced). The same variables
# as in JupyterLab (the pages carry its light theme). A panel's table also sets both itself
# (widgets.core); this rule covers a chapter whose saved panel predates that.
WIDGET_FONT = """<style>
.jupyter-widgets { font-family: var(--jp-ui-font-family); font-size: var(--jp-ui-font-size1);
  color: var(--jp-ui-font-color1); }
.jupyter-widgets.course-panel-view pre { font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size); line-height: var(--jp-code-line-height); }
</style>"""


def make_static(body: str) -> str:
    """The page with its widgets in JupyterLab's font, their controls made inert and the note that says
    so under <body>."""
    head_end, body_start = body.index("</head>"), body.index("<body")
    body_open = body.index(">", body_start) + 1
    return (body[:head_end] + WIDGET_FONT + "\n" + INERT_WIDGETS + "\n" + body[head_end:body_open]
            + STATIC_NOTE + body[body_open:])


def _exporter():
    """nbconvert's JupyterLab-styled HTML exporter with every asset pointing at out/vendor/."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    cfg = Config()
    cfg.HTMLExporter.widget_renderer_url = WIDGETS_JS
    cfg.HTMLExporter.require_js_url = REQUIRE_JS
    cfg.HTMLExporter.mathjax_url = MATHJAX_JS
    cfg.TagRemovePreprocessor.remove_input_tags = {"remove-input"}   # a verdict's source: its text shows once
    return HTMLExporter(config=cfg)


def export(notebook: Path, out: Path) -> Path:
    """One chapter to out/<name>.html, its assets pointing at out/vendor/."""
    body, _ = _exporter().from_filename(str(notebook))
    target = out / (notebook.stem + ".html")
    target.write_text(make_static(body), encoding="utf-8")
    return target


TITLE = "RL for LLMs by numerical experiment"


def write_index(pages: list[Path], out: Path) -> Path:
    """out/index.html: a table of the chapters (number, title linking to its page, notebook), titled by
    each notebook's first heading. The page is a one-cell notebook exported like the chapters, so it has
    their fonts, margins and table style."""
    import nbformat
    titles = dict(chapter_index(ROOT / "notebooks"))
    rows = []
    for page in pages:
        number, _, name = titles.get(page.stem + ".ipynb", page.stem).rpartition(" · ")
        rows.append(f'<tr><td>{html.escape(number)}</td><td><a href="{html.escape(page.name)}">'
                    f'{html.escape(name)}</a></td><td><code>{html.escape(page.stem)}.ipynb</code></td></tr>')
    head = '<th></th><th style="text-align: left">Chapter</th><th style="text-align: left">Notebook</th>'
    text = (f"# {TITLE}\n\nThe chapters with their stored outputs. In this offline edition the sliders show "
            "the values each chapter was run with; open the notebooks in JupyterLab (`make lab`) to move "
            f'them.\n\n<table class="course-index">\n<thead><tr>{head}</tr></thead>\n<tbody>\n'
            + "\n".join(rows) + "\n</tbody>\n</table>\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])
    body, _ = _exporter().from_notebook_node(notebook, resources={"metadata": {"name": TITLE}})
    index = out / "index.html"
    index.write_text(body, encoding="utf-8")
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
