"""Starting and stopping real servers for tests and benchmarks: free ports, health, PIDs;
the backends on them (`real_backend`). The model servers start here (`running`), and the
page too (`started`, through scripts/screenshot.py's `streamlit_app`).

A server dies with the run that started it, even one killed from outside (a vLLM server
holds 4 GB, a page with its model 1 GB; the next run would die of memory, issues 31 and
40): on Linux the kernel sends it SIGTERM when its parent goes (PR_SET_PDEATHSIG), and
each server's process group is recorded under `REGISTRY` with the run that owns it, so
that the next run's start kills the groups whose run is gone (`reap_stale_servers`): a
server that ignored the SIGTERM, or one whose parent died before the kernel was told.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

import pytest
import requests

REGISTRY = Path(tempfile.gettempdir()) / f"lloom-test-servers-{os.getuid()}"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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
    """`spawned(command)`, its output in `log`; yields `url` once `url`/health answers."""
    with spawned(command, env=env, log=log) as process:
        _wait_healthy(process, url, wait, log)
        yield url


@contextmanager
def spawned(
    command: list[str], *, env: Mapping[str, str] | None = None, log: Path,
    user: str | None = None, stop: signal.Signals = signal.SIGTERM,
) -> Iterator[subprocess.Popen]:  # fmt: skip
    """`started(command)` (as `user`, sent `stop`), its output in the file `log`."""
    with open(log, "wb") as out, started(command, out, env=env, user=user, stop=stop) as process:
        yield process


@contextmanager
def started(
    command: list[str], out: IO[bytes], *, env: Mapping[str, str] | None = None,
    cwd: Path | None = None, user: str | None = None, stop: signal.Signals = signal.SIGTERM,
) -> Iterator[subprocess.Popen]:  # fmt: skip
    """Start `command` in its own process group (as `user`, when given and this is root),
    its output (both streams) to `out`, its environment this one's with `env` laid over;
    yield it, and send its group `stop` after, and whenever this process dies (the module's
    note), then kill it if it lingers."""
    process = subprocess.Popen(
        command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        cwd=cwd, start_new_session=True, preexec_fn=_dying_with(os.getpid(), user, stop),
    )  # fmt: skip
    record = _record(process.pid)
    try:
        yield process
    finally:
        _stop(process, stop)
        record.unlink(missing_ok=True)


def reap_stale_servers() -> None:
    """Kill the recorded server groups whose run has ended (killed before it stopped them)."""
    for record in REGISTRY.glob("[0-9]*") if REGISTRY.is_dir() else ():
        try:
            parent, parent_started, started = (int(n) for n in record.read_text().split())
            server = int(record.name)
        except (OSError, ValueError):  # gone meanwhile, or not one `_record` wrote
            record.unlink(missing_ok=True)
            continue
        if _started(parent) == parent_started:
            continue  # its run is alive: its servers are its own
        # The group outlives its leader; a leader's pid reused by another process is not ours.
        if _started(server) in (started, None):
            with suppress(ProcessLookupError):
                os.killpg(server, signal.SIGKILL)
        record.unlink(missing_ok=True)


def _dying_with(
    parent: int, user: str | None = None, stop: signal.Signals = signal.SIGTERM
) -> Callable[[], None] | None:
    """What the child runs before exec: become `user` (when root), then ask for `stop` once
    `parent` dies (Linux only; the server's own shutdown then stops its workers). The
    request comes after the change of user, which would clear it."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the child
    ids = pwd.getpwnam(user)[2:4] if user and os.getuid() == 0 else None

    def before_exec() -> None:
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
        prctl(PR_SET_PDEATHSIG, stop)
        if os.getppid() != parent:  # it died before the kernel was told
            os.kill(os.getpid(), stop)

    return before_exec


def _record(server: int) -> Path:
    """Note that this process owns the server group `server` (for `reap_stale_servers`)."""
    REGISTRY.mkdir(mode=0o700, exist_ok=True)
    record, draft = REGISTRY / str(server), REGISTRY / f".{server}"  # whole, or not there
    draft.write_text(f"{os.getpid()} {_started(os.getpid())} {_started(server) or 0}")
    draft.replace(record)
    return record


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), None where it is gone; a pid
    reused by another process starts at another time. Without /proc (macOS), 0 for any
    live process."""
    if not Path("/proc/self/stat").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime


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


def _stop(process: subprocess.Popen, stop: signal.Signals = signal.SIGTERM) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, stop)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def real_backend(request, name: str):
    """The backend `name` ("mlx", "vllm" or "llamacpp") on the real thing: the session's
    MLX model, or a client of the session's server (closed after)."""
    if name == "mlx":
        yield request.getfixturevalue("mlx_backend")
        return
    if name == "vllm":
        from backends.vllm import VLLMBackend

        server = VLLMBackend(request.getfixturevalue("vllm_url"))
    else:
        from backends.llamacpp import LlamaCppBackend

        server = LlamaCppBackend(request.getfixturevalue("llama_url"))
    try:
        yield server
    finally:
        server.close()
