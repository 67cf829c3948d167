"""Test servers die with the run that started them (issue 31): a pytest-like parent,
started here, starts a real HTTP server through `tests.servers.running` and is then
killed with SIGKILL, as a run killed from outside is; its server must not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.servers import REGISTRY, free_port, reap_stale_servers, running

ROOT = Path(__file__).resolve().parent.parent

# A server on `port` answering /health, that ignores SIGTERM when asked to (a hung one).
SERVER = """
import http.server, signal, sys
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""

# The run: starts the server as the fixtures do, says so, and waits to be killed.
PARENT = """
import sys, time
from pathlib import Path
from tests.servers import running
command = [sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]]
url = f"http://127.0.0.1:{sys.argv[2]}"
with running(command, url, log=Path(sys.argv[4]), wait=60):
    print("up", flush=True)
    time.sleep(3600)
"""

# A run that starts the page as the page tests do (no model behind it), says so, and waits.
PAGE_RUN = """
import sys, time
from pathlib import Path
from scripts.screenshot import streamlit_app
env = {"LLOOM_BACKEND": "llamacpp", "LLAMA_API_URL": sys.argv[2]}  # nothing loads
with streamlit_app(Path(sys.argv[1]), env=env) as (server, url):
    print(server.pid, url, flush=True)
    time.sleep(3600)
"""


def answers(url: str) -> bool:
    try:
        return requests.get(f"{url}/health", timeout=2).status_code == 200
    except requests.ConnectionError:
        return False


def within(seconds: float, happened) -> bool:
    """Whether `happened()` is true within `seconds`, asked every 0.1 s."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if happened():
            return True
        time.sleep(0.1)
    return False


def gone_within(url: str, seconds: float) -> bool:
    return within(seconds, lambda: not answers(url))


def group_gone(group: int, seconds: float) -> bool:
    """Whether process group `group` has no live process left (a zombie an init that does
    not reap leaves behind counts as gone)."""
    return within(seconds, lambda: not live_members(group))


def alive(pid: int) -> bool:
    """Whether process `pid` is there and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def live_members(group: int) -> list[int]:
    if not Path("/proc/self/stat").exists():  # no /proc: any member, zombies too
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return []
        return [group]
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] != "Z" and int(fields[2]) == group:  # state, pgrp
            members.append(int(stat.parent.name))
    return members


def killed_run(tmp_path: Path, mode: str) -> tuple[str, Path]:
    """Start a run whose server is up, then kill the run: (the server's URL, its record)."""
    port = free_port()
    before = set(REGISTRY.glob("[0-9]*")) if REGISTRY.is_dir() else set()
    args = [SERVER, str(port), mode, str(tmp_path / "server.log")]
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout.readline() == "up\n"
        url = f"http://127.0.0.1:{port}"
        assert answers(url)
        (record,) = set(REGISTRY.glob("[0-9]*")) - before
        assert record.read_text().split()[0] == str(parent.pid)
    finally:
        parent.kill()
        parent.wait()
    return url, record


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_server_dies_with_the_run_that_started_it(tmp_path):
    url, record = killed_run(tmp_path, "plain")
    assert gone_within(url, 20), "the server outlived the run that started it"
    assert group_gone(int(record.name), 20)
    reap_stale_servers()  # the record of the killed run goes with the next run's start
    assert not record.exists()


def test_a_server_that_outlives_its_run_is_killed_when_the_next_run_starts(tmp_path):
    url, record = killed_run(tmp_path, "stubborn")
    time.sleep(1)
    assert answers(url), "the stubborn server died by itself: nothing tested"
    server = int(record.name)
    reap_stale_servers()
    assert gone_within(url, 20) and not record.exists()
    assert group_gone(server, 20)


def test_the_servers_of_a_run_still_going_are_left_alone(tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    command = [sys.executable, "-c", SERVER, str(port), "plain"]
    with running(command, f"http://127.0.0.1:{port}", log=log, wait=60) as url:
        reap_stale_servers()
        assert answers(url)
    assert not answers(url)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
def test_a_page_server_dies_with_the_run_that_started_it(tmp_path):
    """`streamlit run lloom.py` started as the page tests start it (scripts/screenshot.py's
    `streamlit_app`) goes with a run killed by SIGKILL: two pages of 950 MB each outlived
    the run the kernel killed for memory (issue 40)."""
    model = f"http://127.0.0.1:{free_port()}"
    run = subprocess.Popen(
        [sys.executable, "-c", PAGE_RUN, str(tmp_path), model],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        pid, url = run.stdout.readline().split()
        page = int(pid)
        assert requests.get(f"{url}/_stcore/health", timeout=10).status_code == 200
    finally:
        run.kill()
        run.wait()
    try:
        assert within(20, lambda: not alive(page)), "the page outlived the run that started it"
        assert group_gone(page, 20)
    finally:
        if alive(page):  # not in the run's group: the page alone
            os.kill(page, signal.SIGKILL)
