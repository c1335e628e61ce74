"""The README's `make lab`, run exactly as written, starts JupyterLab on localhost behind a token."""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from _readme import section, two_commands

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def outward_ip() -> str | None:
    """This machine's address on its default route (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route
        except OSError:
            return None
        ip = s.getsockname()[0]
    return None if ip.startswith("127.") else ip


def lab_env(tmp_path: Path, port: int) -> dict[str, str]:
    """A user's environment: their own Jupyter dirs, a port through JUPYTER_PORT, no browser.

    MAKEFLAGS and friends are dropped so the command runs as typed, not as a sub-make of `make test`.
    """
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "LAB_ARGS"}}
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    # The user's own config: a desktop running the tests must not get a browser tab.
    (cfg / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"open_browser": False}}))
    env.update(JUPYTER_CONFIG_DIR=str(cfg), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"), JUPYTER_PORT=str(port), JUPYTER_PORT_RETRIES="0")
    return env


def wait_for_url(proc: subprocess.Popen, port: int) -> tuple[str, str]:
    seen, deadline = [], time.time() + 180  # the first run may (re)install .venv
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        m = re.search(r"(http://127\.0\.0\.1:%d/lab\?token=(\w*))" % port, line)
        if m:
            return m.group(1), m.group(2)
    raise AssertionError("make lab printed no localhost URL:\n" + "".join(seen[-30:]))


def get(url: str, deadline: float) -> str:
    while True:  # the URL is logged a moment before the socket accepts
        try:
            with urllib.request.urlopen(url, timeout=20) as r:
                return r.read().decode()
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def test_make_lab_as_written_in_the_readme_serves_notebooks_on_localhost_with_token(tmp_path):
    command = two_commands()[0]
    assert command == "make lab"
    assert "JUPYTER_PORT=" in section("Two commands")  # the port is set the way the README says
    port = free_port()
    proc = subprocess.Popen(shlex.split(command), cwd=ROOT, env=lab_env(tmp_path, port),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url, token = wait_for_url(proc, port)
        assert len(token) >= 32, "JupyterLab must run behind a random token"
        api = f"http://127.0.0.1:{port}/api/contents"
        listing = get(f"{api}?token={token}", time.time() + 60)
        assert '"01_why_positions.ipynb"' in listing  # the server's root is notebooks/
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(api, timeout=20)
        assert denied.value.code == 403
        ip = outward_ip()
        if ip is not None:  # bound to 127.0.0.1 only: the machine's other address refuses
            with pytest.raises(OSError):
                socket.create_connection((ip, port), timeout=5).close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def lab_recipe(*prefix: str) -> str:
    """What `make lab` would run (make -n), as the current user or through `prefix`."""
    out = subprocess.run([*prefix, "make", "-n", "-s", "lab"], cwd=ROOT, capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL"}},
                         check=True).stdout
    return next(line for line in out.splitlines() if "jupyter lab" in line)


def test_make_lab_allows_root_exactly_when_run_as_root():
    recipe = lab_recipe()
    assert "--ServerApp.ip=127.0.0.1" in recipe and "--notebook-dir=notebooks" in recipe
    assert ("--allow-root" in recipe) == (os.geteuid() == 0)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to drop to nobody")
def test_make_lab_as_an_ordinary_user_does_not_allow_root():
    recipe = lab_recipe("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    assert "--allow-root" not in recipe and "--ServerApp.ip=127.0.0.1" in recipe
