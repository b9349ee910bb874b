"""The offline HTML edition (`make html`) opens from disk with the network blocked and shows its plots,
its formulas and its sliders' saved state, without a single request leaving the machine.

Needs npm (to fetch the front-end packages once into site/vendor), Debian's chromium and Playwright;
skipped where any is missing.
"""
import shutil
from pathlib import Path

import pytest

from course_lib import site

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("npm")),
                                reason="needs Debian's chromium and npm")
ROOT = Path(__file__).resolve().parents[1]


def test_chapter_page_renders_offline_with_plots_formulas_and_widgets(tmp_path):
    site.install_vendor(ROOT / "site")                       # shared with `make html`, fetched once
    (tmp_path / "vendor").symlink_to(ROOT / "site" / "vendor")
    page = site.export(ROOT / "notebooks" / "02_group_advantages.ipynb", tmp_path)
    left_the_machine, errors = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium"),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        context = browser.new_context(viewport={"width": 1400, "height": 1000})

        def block_network(route):
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                left_the_machine.append(route.request.url)
                route.abort()

        context.route("**/*", block_network)
        tab = context.new_page()
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
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium"),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        tab = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
        tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                  else route.abort())
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
