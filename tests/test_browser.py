"""Every chapter notebook works in a real JupyterLab, driven by headless Chromium.

nbval executes the notebooks but cannot see widgets (it ignores their output). This test
does what a learner does: opens each notebook in JupyterLab, runs all cells from the
Run menu, and checks in the page that no cell shows a traceback, that every widget
rendered, and that moving a slider redraws its figure.

Browser: Debian's Chromium (/usr/bin/chromium) driven by the `playwright` Python
package (`executable_path`); `playwright install` is never needed. `.ci/run` installs
Chromium on a fresh machine. On failure a full-page screenshot per notebook is saved to
build/artifacts/ (or $POSENC_ARTIFACTS_DIR).

Debug one notebook:  .venv/bin/python -m pytest tests/test_browser.py -k 05_ -s
"""
from __future__ import annotations

import json
import os
import secrets
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from _browser import (CHROMIUM, CHROMIUM_ARGS, JS_CLOSE_UNSAVED, LAB_FLAGS, VIEWPORT, LoggedServer,
                      PlaywrightError, chromium_or_skip, free_port, run_notebook, write_lab_settings)

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = Path(os.environ.get("POSENC_BROWSER_NB_DIR", ROOT / "notebooks"))  # override only to debug
ARTIFACTS = Path(os.environ.get("POSENC_ARTIFACTS_DIR", ROOT / "build" / "artifacts"))
NOTEBOOKS = sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

class Lab(LoggedServer):
    """A JupyterLab server on localhost with its own token and throwaway config, data and state."""

    def __init__(self, tmp: Path, root_dir: Path):
        self.port, self.token = free_port(), secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        dirs = {k: tmp / k for k in ("config", "runtime", "data", "settings", "workspaces")}
        for d in dirs.values():
            d.mkdir(parents=True)
        write_lab_settings(dirs["settings"])
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
                   JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
                   JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), JUPYTER_PLATFORM_DIRS="1",
                   PYTHONHASHSEED="0", OMP_NUM_THREADS="2")
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}",
               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={root_dir}", "--ServerApp.port_retries=0", *LAB_FLAGS]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        self.start(cmd, tmp / "lab.log", "JupyterLab", lambda: self.api("status"), cwd=root_dir, env=env)

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.base}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def session_for(self, name: str) -> dict | None:
        return next((s for s in self.api("sessions") if s["path"] == name), None)

    def shutdown_kernels(self) -> None:
        for k in self.api("kernels"):
            self.api(f"kernels/{k['id']}", method="DELETE")



@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp("lab"), NB_DIR)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium_or_skip()() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport=VIEWPORT)
        ctx.set_default_timeout(30_000)
        yield ctx
        ctx.close()


class LabPage:
    """One JupyterLab page for all notebooks (loading JupyterLab costs more than a notebook)."""

    def __init__(self, lab: Lab, context):
        self.lab, self.context, self.page = lab, context, None

    def get(self):
        if self.page is None:  # first use, or after a failure left the page in an unknown state
            self.page = self.context.new_page()
            self.page.goto(f"{self.lab.base}/lab?reset&token={self.lab.token}")
            self.page.locator(".jp-DirListing-item").first.wait_for(timeout=60_000)
        return self.page

    def discard(self):
        if self.page is not None:
            self.page.close()
            self.page = None


@pytest.fixture(scope="module")
def lab_page(browser, lab):  # the browser first: without Chromium, skip before starting JupyterLab
    holder = LabPage(lab, browser)
    yield holder
    holder.discard()


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_jupyterlab_and_its_widgets_respond(lab_page, lab, nb_path, record_property):
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    page = lab_page.get()
    timings["lab"] = time.perf_counter() - t0  # JupyterLab's own load, first notebook only
    try:
        run_notebook(lab, page, nb_path, timings)
        # Close the tab without saving (the run changed it) so the next notebook starts clean.
        page.evaluate(JS_CLOSE_UNSAVED)
    except (AssertionError, PlaywrightError) as exc:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"browser-{nb_path.stem}.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
        except PlaywrightError:
            shot = None
        lab_page.discard()
        raise AssertionError(f"{exc}\nscreenshot: {shot}\nlab log: {lab.log}") from exc
    finally:
        timings["total"] = time.perf_counter() - t0
        record_property("timings_s", {k: round(v, 1) for k, v in timings.items()})
        print(f"\n{nb_path.stem}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
        lab.shutdown_kernels()


def test_the_browser_test_covers_every_chapter_source():
    """A chapter source without its built notebook would silently escape the browser test."""
    sources = {p.stem for p in (ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")}
    built = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert sources <= built, f"run `make notebooks`: no .ipynb for {sorted(sources - built)}"
