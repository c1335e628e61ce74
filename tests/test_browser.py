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
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = Path(os.environ.get("POSENC_BROWSER_NB_DIR", ROOT / "notebooks"))  # override only to debug
ARTIFACTS = Path(os.environ.get("POSENC_ARTIFACTS_DIR", ROOT / "build" / "artifacts"))
CHROMIUM = "/usr/bin/chromium"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
# JupyterLab user settings: no news/update check (its popup would cover the page), every
# cell kept in the DOM (the default virtualised notebook renders only the cells in view),
# no autosave.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # Never write the re-run notebooks back into notebooks/ (the stored outputs are nbval's).
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}
NOTEBOOK_TIMEOUT_S = 240  # a ceiling for Run All Cells on a busy CI machine

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

try:  # the pip package is in the `test` extra; only the browser binary may be missing
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover
    sync_playwright = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server on localhost with its own token and throwaway config, data and state."""

    def __init__(self, tmp: Path, root_dir: Path):
        self.port, self.token = free_port(), secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        dirs = {k: tmp / k for k in ("config", "runtime", "data", "settings", "workspaces")}
        for d in dirs.values():
            d.mkdir(parents=True)
        for name, value in LAB_SETTINGS.items():
            path = dirs["settings"] / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
                   JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
                   JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), JUPYTER_PLATFORM_DIRS="1",
                   PYTHONHASHSEED="0", OMP_NUM_THREADS="2")
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}",
               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={root_dir}", "--ServerApp.port_retries=0",
               "--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True",
               "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = tmp / "lab.log"
        self._log_file = self.log.open("w")
        self.proc = subprocess.Popen(cmd, cwd=root_dir, env=env, stdout=self._log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + 90
        while True:
            try:
                self.api("status")
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError("JupyterLab did not start:\n" + self.log.read_text()[-3000:])
                time.sleep(0.3)

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

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._log_file.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp("lab"), NB_DIR)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if sync_playwright is None:
        pytest.skip("the `playwright` Python package is not installed (it is in pyproject's test extra)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`, "
                    "as .ci/run does); `playwright install` cannot download browsers here")
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
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


def widget_cell_count(nb_path: Path) -> int:
    """Code cells that display a widget: those whose stored output is a widget view."""
    nb = nbformat.read(nb_path, as_version=4)
    return sum(any(WIDGET_MIME in o.get("data", {}) for o in c.get("outputs", []))
               for c in nb.cells if c.cell_type == "code")


def png_output_count(nb_path: Path) -> int:
    """Static figures: stored outputs that carry an image/png."""
    nb = nbformat.read(nb_path, as_version=4)
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


def code_cell_count(nb_path: Path) -> int:
    return sum(c.cell_type == "code" for c in nbformat.read(nb_path, as_version=4).cells)


# JavaScript run in the page ---------------------------------------------------------------
# Execution counts from the notebook model (window.jupyterapp, exposed by the server flag
# below): collapsed solution cells show no prompt in the DOM, the model still has their count.
JS_COUNTS = """() => Array.from(window.jupyterapp.shell.currentWidget.content.model.cells)
    .filter(c => c.type === 'code').map(c => c.executionCount)"""
JS_BUSY_PROMPTS = """() => Array.from(document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')).filter(e => e.textContent.includes('*')).length"""
JS_TRACEBACKS = """() => Array.from(document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
    .map(e => e.textContent).filter(t => /Traceback|\\w+(Error|Exception):/.test(t))"""
# A widget view is an output without a data-mime-type attribute (JupyterLab 4) that holds a
# .jupyter-widgets element, or that shows the manager's placeholder/error text instead.
JS_WIDGETS = """() => Array.from(document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')).filter(o =>
        !o.hasAttribute('data-mime-type') || o.getAttribute('data-mime-type') === '%s'
        || /Loading widget|Error displaying widget/.test(o.textContent)).map(o => ({
        widget: o.querySelector('.jupyter-widgets') !== null,
        images: Array.from(o.querySelectorAll('img')).map(i => i.complete ? i.naturalWidth : 0),
        text: o.innerText.slice(0, 300),
    }))""" % WIDGET_MIME
# Static figures: stored image/png outputs must show as images in the page too.
JS_PNG_OUTPUTS = """() => document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output[data-mime-type="image/png"] img').length"""
JS_DIGEST = """async (img) => {  // SHA-256 of the PNG bytes the <img> shows
    const buf = await (await fetch(img.src)).arrayBuffer();
    const hash = await crypto.subtle.digest('SHA-256', buf);
    return Array.from(new Uint8Array(hash)).map(b => b.toString(16).padStart(2, '0')).join('');
}"""


def wait_for(predicate, timeout: float, what: str, interval: float = 0.25):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def click_menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    page.locator(".lm-Menu-item:visible .lm-Menu-itemLabel", has_text=item).first.click()


def kernel_ready(lab: Lab, page, name: str) -> bool:
    """The server's kernel is idle and the page's toolbar shows it connected and idle."""
    session = lab.session_for(name)
    if not session or session["kernel"]["execution_state"] != "idle":
        return False
    status = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator")
    return status.count() > 0 and status.first.get_attribute("data-status") == "idle"


def run_notebook(lab: Lab, page, nb_path: Path, timings: dict) -> None:
    name = nb_path.name
    t0 = time.perf_counter()
    # The command a double-click in the file browser runs.
    page.evaluate("async p => { await window.jupyterapp.commands.execute('docmanager:open', {path: p}); }", name)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").first.wait_for()
    wait_for(lambda: page.evaluate("() => window.jupyterapp.shell.currentWidget?.context?.path") == name, 10,
             f"{name} to be the current tab")
    timings["page"] = time.perf_counter() - t0
    wait_for(lambda: kernel_ready(lab, page, name), 60, "the kernel to be connected and idle")
    timings["open"] = time.perf_counter() - t0

    # Clear stored outputs (and execution counts) so everything seen below comes from this run.
    click_menu(page, "Edit", "Clear Outputs of All Cells")
    wait_for(lambda: all(n is None for n in page.evaluate(JS_COUNTS)), 10, "outputs to clear")
    n_code = code_cell_count(nb_path)
    assert len(page.evaluate(JS_COUNTS)) == n_code, "JupyterLab shows a different number of code cells"

    t1 = time.perf_counter()
    click_menu(page, "Run", "Run All Cells")

    def finished() -> bool:
        if page.evaluate(JS_BUSY_PROMPTS):
            return False
        return all(n is not None for n in page.evaluate(JS_COUNTS)) or bool(page.evaluate(JS_TRACEBACKS))

    wait_for(finished, NOTEBOOK_TIMEOUT_S, "Run All Cells to finish", interval=0.5)
    timings["run"] = time.perf_counter() - t1

    tracebacks = page.evaluate(JS_TRACEBACKS)
    assert not tracebacks, f"{name}: a cell shows an error:\n" + tracebacks[0][-2000:]
    counts = page.evaluate(JS_COUNTS)
    assert counts == list(range(1, n_code + 1)), f"{name}: cells not run once each, in order: {counts}"

    # Static figures render as pictures in JupyterLab too (not as "<Figure size ...>" text).
    n_png = png_output_count(nb_path)
    assert page.evaluate(JS_PNG_OUTPUTS) >= n_png, f"{name}: fewer figures than the stored notebook's {n_png}"

    # Every widget rendered: as many widget views as cells that display one, each a real widget
    # (not "Loading widget..." / "Error displaying widget"), its images decoded.
    expected = widget_cell_count(nb_path)

    def widgets_rendered():
        views = page.evaluate(JS_WIDGETS)
        ok = len(views) >= expected and all(
            v["widget"] and all(w > 0 for w in v["images"]) and "Loading widget" not in v["text"]
            and "Error displaying widget" not in v["text"] for v in views)
        return (views,) if ok else None  # a tuple: an empty list of views is a valid answer

    try:
        (views,) = wait_for(widgets_rendered, 20, f"{expected} widgets to render")
    except AssertionError:
        raise AssertionError(f"{name}: not every widget rendered ({expected} expected): {page.evaluate(JS_WIDGETS)}")
    assert len(views) == expected, f"{name}: {len(views)} widget views for {expected} widget cells"

    # Move one slider and check its figure changed: the PNG bytes the <img> shows must differ.
    # (A chapter whose widgets have no slider gets its first dropdown or checkbox changed.)
    if expected:
        t2 = time.perf_counter()
        outputs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output").filter(
            has=page.locator(".jupyter-widgets img"))
        with_slider = outputs.filter(has=page.locator(".widget-slider .noUi-handle"))
        out = with_slider.first if with_slider.count() else outputs.first
        assert out.count(), f"{name}: no widget shows a figure"
        img = out.locator("img").first
        before_png = img.evaluate(JS_DIGEST)
        move_control(page, out, name)
        wait_for(lambda: img.evaluate(JS_DIGEST) != before_png, 15, "the figure to change after the control moved")
        timings["slider"] = time.perf_counter() - t2


def move_control(page, out, name: str) -> None:
    """Press ArrowRight on the first slider (ArrowLeft at its maximum); else change a dropdown or checkbox."""
    handle = out.locator(".widget-slider .noUi-handle")
    if handle.count():
        readout = out.locator(".widget-slider .widget-readout").first
        before = readout.inner_text()
        handle.first.scroll_into_view_if_needed()
        handle.first.focus()
        for key in ["ArrowRight"] * 3 + ["ArrowLeft"] * 6:
            page.keyboard.press(key)
            time.sleep(0.15)
            if readout.inner_text() != before:
                break
        assert readout.inner_text() != before, f"{name}: the slider did not move"
        return
    select = out.locator(".widget-dropdown select")
    if select.count():
        options = select.first.locator("option").all_inner_texts()
        current = select.first.evaluate("s => s.options[s.selectedIndex].text")
        select.first.select_option(label=next(o for o in options if o != current))
        return
    checkbox = out.locator(".widget-checkbox input[type=checkbox]")
    assert checkbox.count(), f"{name}: the widget has no slider, dropdown or checkbox to move"
    checkbox.first.click()


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_jupyterlab_and_its_widgets_respond(lab_page, lab, nb_path, record_property):
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    page = lab_page.get()
    timings["lab"] = time.perf_counter() - t0  # JupyterLab's own load, first notebook only
    try:
        run_notebook(lab, page, nb_path, timings)
        # Close the tab without saving (the run changed it) so the next notebook starts clean.
        page.evaluate("""() => { const w = window.jupyterapp.shell.currentWidget;
                                 w.context.model.dirty = false; w.close(); }""")
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
