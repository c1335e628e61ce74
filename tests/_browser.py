"""Driving JupyterLab in headless Chromium: shared by test_browser.py (one local JupyterLab)
and test_hub.py (JupyterLab behind JupyterHub, one server per student).

Browser: Debian's Chromium (/usr/bin/chromium) through the `playwright` Python package
(`executable_path`); `playwright install` is never needed. `.ci/run` installs Chromium.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
from pathlib import Path
from typing import Callable, Protocol

import nbformat
import pytest

try:  # the pip package is in the `test` extra; only the browser binary may be missing
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover
    sync_playwright = None
    PlaywrightError = RuntimeError

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1400, "height": 1000}
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
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
# Server flags: window.jupyterapp for the scripts below, no news or update checks.
LAB_FLAGS = ["--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True",
             "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate"]
NOTEBOOK_TIMEOUT_S = 240  # a ceiling for Run All Cells on a busy CI machine


class Server(Protocol):
    """What run_notebook needs from a Jupyter server: its session for a notebook path."""

    def session_for(self, path: str) -> dict | None: ...


def chromium_or_skip() -> Callable:
    """playwright's sync_playwright, or skip the test saying what is missing."""
    if sync_playwright is None:
        pytest.skip("the `playwright` Python package is not installed (it is in pyproject's test extra)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`, "
                    "as .ci/run does); `playwright install` cannot download browsers here")
    return sync_playwright


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_lab_settings(settings_dir: Path) -> None:
    for name, value in LAB_SETTINGS.items():
        path = settings_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


def stop_group(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group a `start_new_session=True` child leads; SIGKILL it if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)


class LoggedServer:
    """A server process in a session of its own (so stop() ends all it started in its group),
    its output in a log file."""

    log: Path
    proc: subprocess.Popen

    def start(self, cmd: list[str], log: Path, what: str, ready: Callable[[], object], **popen) -> None:
        """Start `cmd` and call `ready` (an HTTP request) until it answers; on exit or after
        90 s, stop it and raise RuntimeError with the log's tail."""
        self.log = log
        self._log_file = log.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True,
                                     **popen)
        deadline = time.time() + 90
        while True:
            try:
                ready()
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError(f"{what} did not start:\n" + log.read_text(errors="replace")[-3000:])
                time.sleep(0.3)

    def stop(self) -> None:
        stop_group(self.proc)
        self._log_file.close()


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
# Execution counts from the notebook model (window.jupyterapp, exposed by LAB_FLAGS):
# collapsed solution cells show no prompt in the DOM, the model still has their count.
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
# Close the current tab without saving (a run changed it).
JS_CLOSE_UNSAVED = """() => { const w = window.jupyterapp.shell.currentWidget;
                              w.context.model.dirty = false; w.close(); }"""


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


def kernel_ready(server: Server, page, path: str) -> bool:
    """The server's kernel is idle and the page's toolbar shows it connected and idle."""
    session = server.session_for(path)
    if not session or session["kernel"]["execution_state"] != "idle":
        return False
    status = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator")
    return status.count() > 0 and status.first.get_attribute("data-status") == "idle"


def run_notebook(server: Server, page, nb_path: Path, timings: dict, path: str | None = None) -> None:
    """Open `path` (the notebook's path on the server; default its file name), clear it, Run All
    Cells, and check: no error, every cell run once in order, every figure and widget rendered,
    and moving a control redraws its figure. `nb_path` is the stored notebook on this disk."""
    name = nb_path.name
    path = path or name
    t0 = time.perf_counter()
    # The command a double-click in the file browser runs.
    page.evaluate("async p => { await window.jupyterapp.commands.execute('docmanager:open', {path: p}); }", path)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").first.wait_for()
    wait_for(lambda: page.evaluate("() => window.jupyterapp.shell.currentWidget?.context?.path") == path, 10,
             f"{path} to be the current tab")
    timings["page"] = time.perf_counter() - t0
    wait_for(lambda: kernel_ready(server, page, path), 60, "the kernel to be connected and idle")
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
