"""Real-browser check of the chapter-02 slider panel in JupyterLab (Debian chromium + Playwright).

Skipped unless Playwright is installed and a `chromium` binary is on PATH: run `make test-browser`,
which installs Playwright into .venv (it never downloads a browser; install Debian's chromium first).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH")

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "course-browser-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    work = Path(tempfile.mkdtemp(prefix="course-lab-"))
    shutil.copy(ROOT / "notebooks" / "02_group_advantages.ipynb", work)   # Lab autosaves: use a copy
    settings = work / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port = _free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(work / "settings"))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--IdentityProvider.token={TOKEN}", f"--notebook-dir={work}",
           "--LabApp.expose_app_in_browser=True"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=1)
            break
        except OSError:
            time.sleep(0.25)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 30 s")
    yield url, work
    proc.terminate()
    proc.wait(timeout=20)
    shutil.rmtree(work, ignore_errors=True)


def test_chapter02_panel_moves_in_a_real_browser(lab, tmp_path):
    url, _ = lab
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/lab/tree/02_group_advantages.ipynb?token={TOKEN}")
        page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=60_000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        slider = page.locator(".widget-slider").filter(has_text="r0").first
        slider.wait_for(timeout=60_000)
        panel_out = page.locator(".widget-output").first
        page.wait_for_function(
            "() => [...document.querySelectorAll('.widget-output')].some(e => e.innerText.includes('+0.8660'))",
            timeout=60_000)
        # r0 from 1.0 to 0.75: the group [0.75, 0, 1, 0] has mean 0.4375, so the table must change
        handle = slider.locator(".noUi-handle, .slider-handle, [role=slider]").first
        handle.focus()
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.widget-output')].some(e => e.innerText.includes('mean = 0.4375'))",
            timeout=30_000)
        text = panel_out.inner_text()
        assert "mean = 0.4375" in text and "0.75" in text
        assert panel_out.locator("img").count() >= 1          # the bar chart re-rendered too
        page.screenshot(path=str(tmp_path / "chapter02_panel.png"), full_page=False)
        browser.close()
