"""A class on JupyterHub: the course config (deploy/jupyterhub_config.py) under a real hub.

The hub runs on 127.0.0.1 only (free ports) with configurable-http-proxy from npm
(`npm ci`: node_modules/.bin), a password login (SharedPasswordAuthenticator: the successor
of DummyAuthenticator.password, deprecated since JupyterHub 5.3) and SimpleLocalProcessSpawner:
each student's JupyterLab is a local process from this .venv with a home of its own under a
tmp dir. A real course server uses Unix users (TLJH) or pods (Z2JH) instead: deploy/README.md.

Chapters reach each home the way they do in class: the student clicks the nbgitpuller link
(deploy/nbgitpuller_link.py), logs in, and nbgitpuller clones the course repository, here a
git repository in a tmp dir reached by a file:// URL (no network), then JupyterLab opens the
chapter. In headless Chromium, two students each run a chapter (Run All Cells) and move a
widget's control; student A's saved edit must not reach student B, nor may A's browser read
B's files; a later click merges the lecturer's new commit and keeps A's edit.

Debug:  .venv/bin/python -m pytest tests/test_hub.py -s   (the hub's log is printed on failure)
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from _browser import (CHROMIUM, CHROMIUM_ARGS, LAB_FLAGS, VIEWPORT, LoggedServer, chromium_or_skip, free_port,
                      run_notebook, wait_for, write_lab_settings)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy"))
from nbgitpuller_link import main as print_links, pull_link  # noqa: E402

COURSE_CONFIG = ROOT / "deploy" / "jupyterhub_config.py"
PROXY = ROOT / "node_modules" / ".bin" / "configurable-http-proxy"
PASSWORD = "positions-" + secrets.token_hex(4)  # SharedPasswordAuthenticator wants >= 8 characters
# Two chapters: A's widget has a dropdown and a checkbox, B's has sliders.
STUDENTS = {"student-a": "01_why_positions.ipynb", "student-b": "02_integer_binary.ipynb"}
TARGET = "posenc"  # the folder nbgitpuller clones into, in each home

# Test-only settings on top of the course config: what a real server sets differently
# (TLJH/Z2JH choose login, spawner, ports and database themselves).
OVERLAY = """\
c = get_config()  # noqa: F821
load_subconfig({course!r})  # noqa: F821
c.JupyterHub.bind_url = {bind!r}
c.JupyterHub.hub_bind_url = {hub_bind!r}
c.ConfigurableHTTPProxy.api_url = {proxy_api!r}
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.JupyterHub.db_url = {db!r}
c.JupyterHub.cookie_secret_file = {cookie!r}
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = {password!r}
c.SharedPasswordAuthenticator.allowed_users = {users!r}
c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"
c.SimpleLocalProcessSpawner.home_dir_template = {homes!r} + "/{{username}}"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = {args!r}
c.Spawner.environment.update({env!r})
c.JupyterHub.services = [{{"name": "hub-test", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["hub-test"]}}]
"""


def course_repo(path: Path) -> Path:
    """The lecturer's repository: the chapters as committed, on branch main."""
    (path / "notebooks").mkdir(parents=True)
    for nb in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        shutil.copy(nb, path / "notebooks" / nb.name)
    git(path, "init", "-q", "-b", "main")
    commit_all(path, "the course as published")
    return path


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=Lecturer", "-c", "user.email=lecturer@example.invalid",
                    "-c", "commit.gpgsign=false", *args],
                   cwd=repo, check=True, capture_output=True, timeout=60)


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


class Hub(LoggedServer):
    """JupyterHub with the course config plus OVERLAY, in a tmp dir; every process it starts
    (proxy, single-user servers, kernels) carries a marker in its environment for cleanup."""

    def __init__(self, tmp: Path):
        self.tmp, self.homes = tmp, tmp / "homes"
        self.homes.mkdir()
        self.marker = secrets.token_hex(8)
        self.token = secrets.token_hex(32)
        self.base = f"http://127.0.0.1:{free_port()}"
        write_lab_settings(tmp / "lab-settings")
        args = LAB_FLAGS + (["--allow-root"] if os.geteuid() == 0 else [])
        env = {"POSENC_HUB_TEST": self.marker, "JUPYTERLAB_SETTINGS_DIR": str(tmp / "lab-settings")}
        config = tmp / "hub_test_config.py"
        config.write_text(OVERLAY.format(
            course=str(COURSE_CONFIG), bind=self.base, hub_bind=f"http://127.0.0.1:{free_port()}",
            proxy_api=f"http://127.0.0.1:{free_port()}", proxy=str(PROXY), db=f"sqlite:///{tmp}/hub.sqlite",
            cookie=str(tmp / "cookie_secret"), password=PASSWORD, homes=str(self.homes),
            singleuser=str(Path(sys.executable).parent / "jupyterhub-singleuser"), args=args, env=env,
            token=self.token, users=set(STUDENTS)))
        self.start([sys.executable, "-m", "jupyterhub", "-f", str(config)], tmp / "hub.log", "JupyterHub",
                   lambda: self.api("hub/api/"), cwd=tmp, env=dict(os.environ, POSENC_HUB_TEST=self.marker))

    def api(self, path: str, method: str = "GET"):
        """GET/POST/... through the proxy with the admin service's token (`hub/api/...`,
        `user/<name>/api/...`)."""
        req = urllib.request.Request(f"{self.base}/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def processes(self) -> dict[int, dict[str, str]]:
        """pid -> environment of every live process carrying this hub's marker."""
        found = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                raw = (d / "environ").read_bytes().decode(errors="replace").split("\0")
            except OSError:  # gone, or not ours to read
                continue
            if f"POSENC_HUB_TEST={self.marker}" in raw:
                found[int(d.name)] = dict(item.split("=", 1) for item in raw if "=" in item)
        return found

    def stop(self) -> None:
        """Stop the hub (it stops the proxy and the students' servers), then kill by pid
        whatever marked process outlived it (a crash or a hung shutdown)."""
        try:
            super().stop()
        finally:
            for pid in self.processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


class StudentServer:
    """One student's JupyterLab, seen by run_notebook through the hub's API."""

    def __init__(self, hub: Hub, user: str):
        self.hub, self.user = hub, user

    def session_for(self, path: str) -> dict | None:
        return next((s for s in self.hub.api(f"user/{self.user}/api/sessions") if s["path"] == path), None)

    def contents(self, path: str) -> dict:
        return self.hub.api(f"user/{self.user}/api/contents/{path}")


def listening_addresses(pids) -> set[str]:
    """The local addresses of the TCP sockets these processes listen on."""
    listening = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                hex_ip = fields[1].split(":")[0]
                # the kernel prints the address as 32-bit words in host (little-endian) order
                raw = b"".join(bytes.fromhex(hex_ip[i:i + 8])[::-1] for i in range(0, len(hex_ip), 8))
                listening[fields[9]] = str(ipaddress.ip_address(raw))
    found = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        found |= {listening[m.group(1)] for link in links if (m := re.fullmatch(r"socket:\[(\d+)\]", link))
                  and m.group(1) in listening}
    return found


def rss_mb(processes: dict[int, dict[str, str]], user: str) -> float:
    """Resident memory of one student's server and kernel, in MB."""
    total = 0
    for pid, env in processes.items():
        if env.get("JUPYTERHUB_USER") == user:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:  # ended since the scan
                continue
            total += int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))
    return total / 1024


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    if not os.access(PROXY, os.X_OK):
        pytest.skip(f"{PROXY.relative_to(ROOT)} is missing: run `npm ci` (package-lock.json; .ci/run does)")
    chromium_or_skip()  # skip before starting the hub when there is no browser
    server = Hub(tmp_path_factory.mktemp("hub"))
    yield server
    server.stop()


def submit_login(page, link: str, user: str, password: str) -> None:
    page.goto(link)  # not logged in yet: the hub shows its login form first
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")


def wrong_password_is_refused(context, user: str, link: str) -> None:
    page = context.new_page()
    submit_login(page, link, user, PASSWORD + "x")
    page.locator(".login_error").wait_for()
    page.close()


def log_in_through_link(context, user: str, link: str):
    """What a student does: click the course link, log in; returns the page once JupyterLab
    shows the chapter nbgitpuller pulled."""
    page = context.new_page()
    failed = []  # an error page on the way (e.g. 404 for /git-pull without nbgitpuller) fails at once
    page.on("response", lambda r: failed.append(f"HTTP {r.status} {r.url}")
            if r.status >= 400 and r.request.is_navigation_request() else None)
    submit_login(page, link, user, PASSWORD)
    # spawn -> nbgitpuller's progress page -> JupyterLab on the chapter
    lab_url = re.compile(rf"/user/{user}/lab/tree/{TARGET}/notebooks/")
    page.wait_for_url(lambda url: bool(failed) or bool(lab_url.search(url)), timeout=120_000)
    assert not failed, failed
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
    return page


def pull_again(hub: Hub, user: str, repo_url: str) -> str:
    """The git pull a second click on the link runs (nbgitpuller's event stream), via the API."""
    query = urlencode({"repo": repo_url, "branch": "main", "targetpath": TARGET})
    req = urllib.request.Request(f"{hub.base}/user/{user}/git-pull/api?{query}",
                                 headers={"Authorization": f"token {hub.token}"})
    with urllib.request.urlopen(req, timeout=120) as r:
        stream = r.read().decode()
    assert '"phase": "finished"' in stream, stream[-2000:]
    return stream


def test_pull_link_template():
    link = pull_link("https://hub.example.edu/", "https://github.com/you/posenc", "05_rope.ipynb")
    assert link == ("https://hub.example.edu/hub/user-redirect/git-pull?repo=https%3A%2F%2Fgithub.com%2Fyou"
                    "%2Fposenc&branch=main&targetpath=posenc&urlpath=lab%2Ftree%2Fposenc%2Fnotebooks%2F05_rope.ipynb")
    for kwargs, name in [({"hub_url": "hub.example.edu"}, "hub_url"), ({"repo_url": "git@github.com:x/y"}, "repo_url"),
                         ({"chapter": "../etc/passwd"}, "chapter"), ({"branch": "a b"}, "branch"),
                         ({"target": ".."}, "target")]:
        args = {"hub_url": "https://h.edu", "repo_url": "https://g.com/x/y", "chapter": "01_why_positions.ipynb"}
        args.update(kwargs)
        with pytest.raises(ValueError, match=name):
            pull_link(**args)


def test_pull_links_for_every_chapter(capsys):
    print_links(["https://hub.example.edu", "https://github.com/you/posenc"])
    opened = [line.rsplit("%2F", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert opened == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.hub
@pytest.mark.browser  # so `-m "not browser"` leaves it out with the other Chromium tests
@pytest.mark.timeout(600)
def test_two_students_run_chapters_and_keep_their_own_copies(hub, tmp_path, record_property):
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    repo = course_repo(tmp_path / TARGET)
    repo_url = repo.as_uri()
    marker = f"student A's note {secrets.token_hex(4)}"
    try:
        with chromium_or_skip()() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                pages = {}
                for user, chapter in STUDENTS.items():
                    t = time.perf_counter()
                    context = browser.new_context(viewport=VIEWPORT)  # a browser of their own: own cookies
                    context.set_default_timeout(30_000)
                    link = pull_link(hub.base, repo_url, chapter)
                    if user == "student-a":
                        wrong_password_is_refused(context, user, link)
                    pages[user] = page = log_in_through_link(context, user, link)
                    timings[f"{user} login+spawn+pull"] = time.perf_counter() - t
                    run = {}
                    run_notebook(StudentServer(hub, user), page, repo / "notebooks" / chapter, run,
                                 path=f"{TARGET}/notebooks/{chapter}")
                    timings[f"{user} run"] = run["run"]

                # Everything the hub started listens on the loopback interface only.
                procs = hub.processes()
                assert {env.get("JUPYTERHUB_USER") for env in procs.values()} >= set(STUDENTS)
                addresses = listening_addresses(procs)
                assert addresses and all(ipaddress.ip_address(a).is_loopback for a in addresses), addresses
                # The course config's environment reached each student's server and kernel.
                for user in STUDENTS:
                    threads = {env.get("OMP_NUM_THREADS") for env in procs.values()
                               if env.get("JUPYTERHUB_USER") == user}
                    assert threads == {"1"}, f"{user}: OMP_NUM_THREADS {threads}"
                    timings[f"{user} RSS MB"] = rss_mb(procs, user)

                # Student A edits the chapter they ran and saves it.
                path_a = f"{TARGET}/notebooks/{STUDENTS['student-a']}"
                pages["student-a"].evaluate("""async (m) => {
                    const w = window.jupyterapp.shell.currentWidget;
                    w.content.model.sharedModel.insertCell(0, {cell_type: 'markdown', source: m});
                    await w.context.save(); }""", marker)
                a_file = hub.homes / "student-a" / path_a
                wait_for(lambda: marker in a_file.read_text(), 10, "A's edit to reach A's disk")
                assert marker in StudentServer(hub, "student-a").contents(path_a)["content"]["cells"][0]["source"]

                # ... and it stays A's: B's copy is the course's, on disk and through B's server.
                b_home = hub.homes / "student-b"
                b_file = b_home / path_a
                assert b_file.read_bytes() == (repo / "notebooks" / STUDENTS["student-a"]).read_bytes()
                assert marker not in json.dumps(StudentServer(hub, "student-b").contents(path_a)["content"])
                assert not [f for f in b_home.rglob("*") if f.is_file() and marker.encode() in f.read_bytes()]
                # A's browser cannot read B's server (the hub's cookie is A's alone).
                peek = pages["student-a"].request.get(f"{hub.base}/user/student-b/api/contents/{path_a}",
                                                      max_redirects=0)
                assert peek.status == 403, f"A's browser asked for B's file: HTTP {peek.status}"
                # Default URL of the course config: a logged-in student at the hub lands in JupyterLab.
                home = pages["student-b"].request.get(f"{hub.base}/hub/")
                assert urlsplit(home.url).path.rstrip("/") == "/user/student-b/lab", home.url
            finally:
                browser.close()

        # Mid-term the lecturer publishes a new file; A's next click merges it and keeps A's edit.
        (repo / "notebooks" / "week2.md").write_text("# Week 2\n")
        commit_all(repo, "week 2")
        t = time.perf_counter()
        pull_again(hub, "student-a", repo_url)
        timings["second pull"] = time.perf_counter() - t
        assert (hub.homes / "student-a" / TARGET / "notebooks" / "week2.md").read_text() == "# Week 2\n"
        assert marker in a_file.read_text()
    except Exception as exc:
        raise AssertionError(f"{exc}\n--- hub log (tail) ---\n{hub.log_tail()}") from exc
    finally:
        timings["total"] = time.perf_counter() - t0
        record_property("timings", {k: round(v, 1) for k, v in timings.items()})
        print("\nhub: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
