"""Real-browser check of the chapter-02 slider panel in JupyterLab (Debian chromium + Playwright).

Part of `make test` where Playwright is installed in .venv and a `chromium` binary is on PATH (.ci/run
installs both and sets COURSE_BROWSER_TEST=required, so there it fails rather than skips;
`make test-browser` installs Playwright and runs only this file); skipped otherwise.
Playwright never downloads a browser here: it drives Debian's chromium.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium")
if os.environ.get("COURSE_BROWSER_TEST") == "required":          # .ci/run: never skip silently
    assert CHROMIUM, "COURSE_BROWSER_TEST=required but no chromium on PATH"
    import playwright.sync_api as playwright
else:
    playwright = pytest.importorskip("playwright.sync_api", reason="Playwright not installed")
    pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH")

from course_lib.widgets.core import SLIDER_TRACK_PX  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "course-browser-test"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"
# Generous: a loaded 2-core machine is slow, not wrong. Every wait is for the exact state asserted next.
WAIT_MS = int(os.environ.get("COURSE_BROWSER_WAIT_MS", 180_000))


# The chapters whose panels the layout test draws at a small laptop's width: the cells it runs (the
# imports, then each panel)
def _panel_cells(name: str) -> tuple:
    """The setup cell (index 1) and every cell that shows a panel (calls a ``*_panel(...)``), found
    by content so that a cell added above one does not point the test at the wrong cell."""
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    return (1, *(i for i, c in enumerate(cells) if c["cell_type"] == "code" and "_panel(" in "".join(c["source"])))


PANEL_CELLS = {name: _panel_cells(name) for name in ("01_ppo_clip_and_gae", "03_loss_aggregation",
                                                     "05_ratios_and_clipping")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    work = Path(tempfile.mkdtemp(prefix="course-lab-"))
    for name in ("02_group_advantages", *PANEL_CELLS):                     # Lab autosaves: use copies
        shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", work)
    shutil.copytree(ROOT / "notebooks" / "data", work / "data")          # chapter 02 reads chapter 07's runs
    # The course's settings defaults, as `make lab` installs them into the venv (overrides.json in the
    # app settings folder); empty user settings and workspaces so a reader's own cannot interfere.
    app_settings = work / "app-settings"
    app_settings.mkdir()
    shutil.copy(ROOT / "notebooks" / ".lab-settings" / "overrides.json", app_settings)
    port = _free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(work / "user-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--IdentityProvider.token={TOKEN}", f"--notebook-dir={work}",
           f"--LabApp.app_settings_dir={app_settings}", "--LabApp.expose_app_in_browser=True"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("JupyterLab did not start within 120 s")
            time.sleep(0.25)
    yield url, work
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(work, ignore_errors=True)


def test_lab_serves_the_course_settings_no_news_popup(lab):
    url, _ = lab
    with urllib.request.urlopen(f"{url}/lab/api/settings/{NOTIFICATION}?token={TOKEN}", timeout=30) as r:
        settings = json.load(r)
    # overrides.json replaces the schema's defaults ("none": ask) with "false": never fetch, never ask
    assert settings["schema"]["properties"]["fetchNews"]["default"] == "false"


# The panel's view: the table text, the chart's src, and whether the chart is decoded and shown.
VIEW_STATE = """() => {
  const v = document.querySelector('.course-panel-view');
  if (!v) return null;
  const img = v.querySelector('img');
  return {text: v.textContent, src: img ? img.src : null, n_img: v.querySelectorAll('img').length,
          shown: !!img && img.complete && img.naturalWidth > 0};
}"""

# Records every state the view passes through, to prove that the new table never shows next to the
# old chart (text and figure are one update).
WATCH = """(oldSrc) => {
  window.__panelStates = [];
  const v = document.querySelector('.course-panel-view');
  new MutationObserver(() => {
    const img = v.querySelector('img');
    window.__panelStates.push({newText: v.textContent.includes('mean = 0.4375'),
                               oldImg: !img || img.src === oldSrc});
  }).observe(v, {childList: true, subtree: true, characterData: true, attributes: true});
}"""


def test_chapter02_panel_moves_in_a_real_browser(lab, tmp_path):
    url, _ = lab
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{url}/lab/tree/02_group_advantages.ipynb?token={TOKEN}")
            page.get_by_text("Python 3 (ipykernel) | Idle").wait_for()
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")

            # the panel has rendered its defaults: table and chart, the chart decoded
            page.wait_for_function(f"() => {{ const s = ({VIEW_STATE})(); "
                                   "return s && s.text.includes('+0.8660') && s.shown; }")
            before = page.evaluate(VIEW_STATE)
            assert "mean = 0.5000" in before["text"] and before["n_img"] == 1

            # rewards beyond G = 4 are greyed out, the others are not
            sliders = {name: page.locator(".widget-slider").filter(
                           has=page.locator(".widget-label", has_text=re.compile(f"^{name}$")))
                       for name in ("G", "r0", "r3", "r4", "r5")}
            assert all(s.count() == 1 for s in sliders.values())
            disabled = {n: s.evaluate("e => e.querySelector('[disabled]') !== null")     # ipywidgets 8
                        for n, s in sliders.items()}
            assert disabled == {"G": False, "r0": False, "r3": False, "r4": True, "r5": True}

            # r0 from 1.0 to 0.75: the group [0.75, 0, 1, 0] has mean 0.4375; wait for the new table
            # AND a new, decoded chart: the state asserted below
            page.evaluate(WATCH, before["src"])
            handle = sliders["r0"].locator(".noUi-handle, .slider-handle, [role=slider]").first
            handle.focus()
            page.keyboard.press("ArrowLeft")
            page.wait_for_function(f"(old) => {{ const s = ({VIEW_STATE})(); return s && "
                                   "s.text.includes('mean = 0.4375') && s.src !== old && s.shown; }",
                                   arg=before["src"])
            after = page.evaluate(VIEW_STATE)
            assert "0.75" in after["text"] and "+0.4167" in after["text"]   # RLOO of y0: 0.75 - 1/3
            assert after["n_img"] == 1 and after["src"] != before["src"]
            states = page.evaluate("window.__panelStates")
            assert states and not any(s["newText"] and s["oldImg"] for s in states), states

            assert page.get_by_text("official Jupyter news").count() == 0
            page.screenshot(path=str(tmp_path / "chapter02_panel.png"), full_page=False)
        finally:
            browser.close()


# Each panel view against its output area: every table and figure inside it must end within the area, and
# a table must not need its scroll bar (the whole table readable); the height of each panel (controls,
# table, figure) against the notebook's visible height; every slider's position and the width of its track.
LAYOUT = """() => ({views: Array.from(document.querySelectorAll('.course-panel-view')).map(v => {
  const area = v.closest('.jp-OutputArea-output').getBoundingClientRect();
  return {area: area.right, height: area.height, items: Array.from(v.querySelectorAll('img, pre')).map(e => ({tag: e.tagName,
          right: e.getBoundingClientRect().right, scroll: e.scrollWidth, client: e.clientWidth,
          shown: e.tagName !== 'IMG' || (e.complete && e.naturalWidth > 0)}))};
}), screen: window.jupyterapp.shell.currentWidget.node.querySelector('.jp-WindowedPanel-outer').clientHeight,
    sliders: Object.fromEntries(Array.from(document.querySelectorAll('.widget-slider')).map(s => {
  const r = s.getBoundingClientRect(); return [s.querySelector('.widget-label').textContent, [r.left, r.top]];
})), tracks: Array.from(document.querySelectorAll('.widget-slider .noUi-target')).map(
  t => t.getBoundingClientRect().width)})"""


def test_panels_fit_the_column_of_a_1366_px_screen_with_the_file_browser_open(lab, tmp_path):
    """Chapters 01, 03 and 05's panels at 1366 x 768 with the file browser open and closed: no figure or
    table is cut at the right; every slider's track is as wide as the headless test assumes; each of
    chapter 05's panels (controls, table, figure and legend) fits the notebook's visible height; chapter
    03's reward and length sliders of one response stay one above the other."""
    url, _ = lab
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]
    layouts = {}
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            for name, cells in PANEL_CELLS.items():
                page = browser.new_page(viewport={"width": 1366, "height": 768})   # one Lab page each
                page.set_default_timeout(WAIT_MS)
                page.goto(f"{url}/lab/tree/{name}.ipynb?token={TOKEN}")
                # this notebook's own kernel idle (the restored workspace may show another tab's status)
                page.wait_for_function("""(path) => { if (!window.jupyterapp) return false;
                  const nb = window.jupyterapp.shell.currentWidget;
                  const k = nb && nb.sessionContext && nb.sessionContext.session
                            && nb.sessionContext.session.kernel;
                  return !!nb && !!nb.context && nb.context.path === path && !!k && k.status === 'idle'; }""", arg=f"{name}.ipynb")
                page.evaluate("window.jupyterapp.commands.execute('filebrowser:activate')")
                assert page.evaluate("document.querySelector('#jp-left-stack').getBoundingClientRect()"
                                     ".width") >= 200                      # the file browser is open
                page.evaluate("""async (cells) => {
                  const nb = window.jupyterapp.shell.currentWidget;
                  for (const i of cells) { nb.content.activeCellIndex = i;
                                           await window.jupyterapp.commands.execute('notebook:run-cell'); }
                }""", list(cells))
                n_panels = len(cells) - 1
                page.wait_for_function(f"() => {{ const v = document.querySelectorAll('.course-panel-view img');"
                                       f" return v.length === {n_panels} && Array.from(v).every("
                                       "i => i.complete && i.naturalWidth > 0); }")
                layouts[name] = page.evaluate(LAYOUT)
                page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=False)
                page.evaluate("window.jupyterapp.shell.collapseLeft()")     # the widest column: full-size figures
                page.wait_for_function("document.querySelector('#jp-left-stack').getBoundingClientRect().width < 10"
                                       " || document.querySelector('#jp-left-stack').offsetParent === null")
                page.wait_for_timeout(500)                                  # the images re-laid out
                layouts[name + " (no file browser)"] = page.evaluate(LAYOUT)
                page.close()
        finally:
            browser.close()
    for name, layout in layouts.items():
        assert len(layout["views"]) == len(PANEL_CELLS[name.split()[0]]) - 1
        for view in layout["views"]:
            for item in view["items"]:
                assert item["shown"] and item["right"] <= view["area"] + 1, (name, item, view["area"])
                assert item["tag"] == "IMG" or item["scroll"] <= item["client"] + 1, (name, item)
        # the headless test of every slider's steps (test_widgets) counts on this track width
        tracks = layout["tracks"]
        assert tracks and all(abs(t - SLIDER_TRACK_PX) <= 2 for t in tracks), (name, tracks)
    for name in ("05_ratios_and_clipping", "05_ratios_and_clipping (no file browser)"):
        screen, views = layouts[name]["screen"], layouts[name]["views"]
        assert 550 < screen < 700                          # the notebook's visible height at 768 px
        assert all(view["height"] <= screen for view in views), (name, screen, [v["height"] for v in views])
    sliders = layouts["03_loss_aggregation"]["sliders"]
    for i in range(4):
        (x_r, y_r), (x_l, y_l) = sliders[f"R{i}"], sliders[f"L{i}"]
        assert abs(x_r - x_l) < 2 and y_l > y_r, (i, sliders)            # L_i right under R_i
