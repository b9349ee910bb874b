"""The offline HTML edition (`make html`) opens from disk with the network blocked and shows its plots,
its formulas and its sliders' saved state, without a single request leaving the machine.

Needs npm (to fetch the front-end packages once into site/vendor), Debian's chromium and Playwright;
skipped where any is missing.
"""
import re
import shutil
from pathlib import Path

import pytest

from course_lib import site

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("npm")),
                                reason="needs Debian's chromium and npm")
ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def offline_tab(p, width: int, height: int, left_the_machine: list | None = None):
    """(browser, tab): headless chromium at width x height that loads file:// URLs only; every other
    request is aborted and its URL appended to ``left_the_machine``."""
    browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
    context = browser.new_context(viewport={"width": width, "height": height})
    blocked = [] if left_the_machine is None else left_the_machine

    def block_network(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", block_network)
    return browser, context.new_page()


def test_chapter_page_renders_offline_with_plots_formulas_and_widgets(tmp_path):
    site.install_vendor(ROOT / "site")                       # shared with `make html`, fetched once
    (tmp_path / "vendor").symlink_to(ROOT / "site" / "vendor")
    page = site.export(ROOT / "notebooks" / "02_group_advantages.ipynb", tmp_path)
    left_the_machine, errors = [], []
    with sync_api.sync_playwright() as p:
        browser, tab = offline_tab(p, 1400, 1000, left_the_machine)
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.goto(page.as_uri())
        tab.wait_for_function("document.querySelectorAll('.MathJax_CHTML').length > 10", timeout=30_000)
        tab.wait_for_selector(".widget-slider", timeout=30_000)
        plots = tab.evaluate("Array.from(document.images).filter(i => i.naturalWidth > 0).length")
        sliders = tab.evaluate("document.querySelectorAll('.widget-slider').length")
        browser.close()
    assert left_the_machine == [] and errors == []
    assert plots >= 3                                        # chapter 02 stores three figures and the panel's
    assert sliders == 7                                      # G and r0..r5, in their saved state


def test_saved_panel_is_inert_says_so_and_keeps_its_table_in_a_monospace_font(tmp_path):
    """Chapter 03's panel offline: the note at the top, a slider that neither a key nor a drag moves,
    and the saved table in the code font (a proportional one misaligns its columns)."""
    site.install_vendor(ROOT / "site")
    (tmp_path / "vendor").symlink_to(ROOT / "site" / "vendor")
    page = site.export(ROOT / "notebooks" / "03_loss_aggregation.ipynb", tmp_path)
    with sync_api.sync_playwright() as p:
        browser, tab = offline_tab(p, 1366, 768)
        tab.goto(page.as_uri())
        tab.wait_for_selector(".course-panel-view pre", timeout=30_000)
        note = tab.locator(".course-static-note").inner_text()
        font = tab.evaluate("getComputedStyle(document.querySelector('.course-panel-view pre')).fontFamily")
        slider = tab.locator(".widget-slider").first
        readout = slider.locator(".widget-readout")
        before = readout.inner_text()
        handle = slider.locator(".noUi-handle").first
        handle.focus()
        tab.keyboard.press("ArrowRight")
        box = handle.bounding_box()
        tab.mouse.move(box["x"] + 2, box["y"] + 2)
        tab.mouse.down()
        tab.mouse.move(box["x"] + 150, box["y"] + 2)
        tab.mouse.up()
        after = readout.inner_text()
        browser.close()
    assert "do not move" in note
    assert "mono" in font.lower() or "consolas" in font.lower(), font
    assert after == before


def test_index_and_chapter_page_are_set_in_the_notebooks_fonts_and_spacing(tmp_path):
    """At 1366 x 768, offline: the index in the chapters' sans font with a table of the chapters; on
    chapter 05's page the panel's labels in that font too (not the browser's serif), the panel's table in
    the code font at the code line height (not double-spaced, even where the saved panel does not set
    it), and a diff in the code font with its removed lines red and its added lines green."""
    site.install_vendor(ROOT / "site")
    (tmp_path / "vendor").symlink_to(ROOT / "site" / "vendor")
    page = site.export(ROOT / "notebooks" / "05_ratios_and_clipping.ipynb", tmp_path)
    index = site.write_index([page], tmp_path)
    # as a chapter saved before its panels' tables carried their own line height: the page's rule holds
    page.write_text(page.read_text().replace("line-height: var(--jp-code-line-height, 1.3077)", ""))
    with sync_api.sync_playwright() as p:
        browser, tab = offline_tab(p, 1366, 768)
        tab.goto(index.as_uri())
        listed = tab.evaluate("""() => ({h1: getComputedStyle(document.querySelector('h1')).fontFamily,
          cell: getComputedStyle(document.querySelector('.course-index td')).fontFamily,
          links: Array.from(document.querySelectorAll('.course-index tbody a')).map(a => a.getAttribute('href'))})""")
        tab.goto(page.as_uri())
        tab.wait_for_selector(".course-panel-view pre", timeout=30_000)
        shown = tab.evaluate("""() => {
          const st = e => getComputedStyle(e);
          const pre = document.querySelector('.course-panel-view pre');
          const diff = document.querySelector('pre.course-diff');
          const line = start => diff && Array.from(diff.querySelectorAll('span')).find(s => s.textContent.startsWith(start));
          const color = e => e ? st(e).color : 'none';
          return {text: st(document.querySelector('.jp-RenderedMarkdown p')).fontFamily,
                  labels: Array.from(document.querySelectorAll('.widget-label, .widget-readout')).map(e => st(e).fontFamily),
                  table: st(pre).fontFamily, line_height: parseFloat(st(pre).lineHeight), size: parseFloat(st(pre).fontSize),
                  diff: diff ? st(diff).fontFamily : 'none', removed: color(line('-def')), added: color(line('+def'))}; }""")
        browser.close()
    assert listed["links"] == [page.name]
    assert listed["h1"] == listed["cell"] == shown["text"] and "sans-serif" in shown["text"]   # the chapters' font
    assert shown["labels"] and all(font == shown["text"] for font in shown["labels"]), shown["labels"][:2]
    assert "monospace" in shown["table"] and shown["line_height"] < 1.4 * shown["size"], shown
    assert "monospace" in shown["diff"]
    red, green = (tuple(int(x) for x in re.findall(r"\d+", shown[k])[:3]) or (0, 0, 0) for k in ("removed", "added"))
    assert red[0] > 120 and red[1] < 60 and green[1] > 100 and green[0] < 60, (red, green)
