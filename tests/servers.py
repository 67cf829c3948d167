"""Starting and stopping real servers for tests and benchmarks: free ports, health, PIDs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests


def required(path: Path | None, what: str, script: str) -> Path:
    """`path`, or a skip saying how to build it (a failure under CI, which builds it first)."""
    if path is None:
        message = f"{what} is missing: run {script}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(command: list[str], url: str, *, env: dict | None = None, log: Path, wait: float):
    """Start `command` in its own process group, wait for `url`/health, stop it by PID after."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
            start_new_session=True,
        )  # fmt: skip
    try:
        _wait_healthy(process, url, wait, log)
        yield url
    finally:
        _stop(process)


def _wait_healthy(process: subprocess.Popen, url: str, wait: float, log: Path) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server at {url} not healthy after {wait} s: {log.read_text()[-2000:]}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
