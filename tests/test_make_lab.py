"""`make lab` really starts JupyterLab on localhost behind a non-empty token."""
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_notebooks_on_localhost_with_token(tmp_path):
    port = free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"))
    args = f"--port={port} --no-browser" + (" --allow-root" if os.geteuid() == 0 else "")
    proc = subprocess.Popen(["make", "-s", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url, seen, deadline = None, [], time.time() + 120
        while time.time() < deadline and url is None:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            seen.append(line)
            m = re.search(r"(http://127\.0\.0\.1:%d/lab\?token=(\w*))" % port, line)
            if m:
                url, token = m.group(1), m.group(2)
        assert url, "make lab printed no localhost URL:\n" + "".join(seen[-30:])
        assert len(token) >= 32, "JupyterLab must run behind a random token"
        api = f"http://127.0.0.1:{port}/api/contents"
        listing, deadline = None, time.time() + 60
        while listing is None:  # the URL is logged a moment before the socket accepts
            try:
                with urllib.request.urlopen(f"{api}?token={token}", timeout=20) as r:
                    listing = r.read().decode()
            except urllib.error.URLError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        assert '"01_why_positions.ipynb"' in listing  # the server's root is notebooks/
        try:
            urllib.request.urlopen(api, timeout=20)
            raise AssertionError("the API answered without a token")
        except urllib.error.HTTPError as e:
            assert e.code == 403
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
