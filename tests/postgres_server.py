"""A real PostgreSQL server for tests and benchmarks: Debian's `postgresql` package's
`initdb` and `postgres` (scripts/setup.sh --tests installs it), a cluster in a temporary
folder, listening on a loopback port only, with a password login (scram-sha-256), and a
fresh database per test (`database`).

The server dies with the run (`tests.servers.spawned`: PR_SET_PDEATHSIG, recorded for the
next run to reap): sent SIGINT, PostgreSQL's fast shutdown. PostgreSQL refuses to run as
root, so under root it runs as the package's `postgres` user, in a folder that user owns.
It is tuned for tests (no fsync: a killed page process, not a killed server, is what the
tests survive), and small: 32 MB of shared buffers.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.servers import free_port, required, spawned

DEBIAN = Path("/usr/lib/postgresql")  # Debian's package: a folder per major version (15, 17...)
USER = "postgres"  # the Debian package's system user: PostgreSQL runs as it under root
ADMIN, PASSWORD = "lloom", "not-a-real-secret-7f3a"  # the cluster's superuser and password


class Server:
    """A cluster in `folder`, served on `port`: how to reach it, and, for the tests of a
    database that goes down, `stop` and `start`."""

    def __init__(self, folder: Path, port: int, command: list[str], user: str | None) -> None:
        self.folder, self.port = folder, port
        self._command, self._user = command, user
        self._running: ExitStack | None = None

    def url(self, database: str = "postgres", *, password: str = PASSWORD) -> str:
        return f"postgresql://{ADMIN}:{password}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        stack = ExitStack()
        log = self.folder / "server.log"
        process = stack.enter_context(
            spawned(self._command, log=log, user=self._user, stop=signal.SIGINT)
        )
        self._running = stack
        _wait_ready(process, self)

    def stop(self) -> None:
        """Stop it (PostgreSQL's fast shutdown: its clients are disconnected)."""
        if self._running is not None:
            self._running.close()
            self._running = None


def installed() -> Path:
    """The folder of the newest installed PostgreSQL's programs (the release's `postgresql`
    package: 15 on Debian 12, 17 on 13), or a skip (a failure under CI) saying how."""
    majors = [p.parent for p in DEBIAN.glob("*/bin/initdb") if p.parent.parent.name.isdigit()]
    here = max(majors, key=lambda bin_dir: int(bin_dir.parent.name), default=None)
    return required(here, "PostgreSQL", "bash scripts/setup.sh --tests")


@contextmanager
def postgres_server() -> Iterator[Server]:
    """A new cluster in a temporary folder, served on 127.0.0.1 (removed after)."""
    bin_dir = installed()
    folder = Path(tempfile.mkdtemp(prefix="lloom-pg-"))
    user = USER if os.getuid() == 0 else None
    server = None
    try:
        data = folder / "data"
        (folder / "pw").write_text(PASSWORD)
        if user:
            ids = pwd.getpwnam(user)
            for path in (folder, folder / "pw"):
                os.chown(path, ids.pw_uid, ids.pw_gid)
        _as(user, [str(bin_dir / "initdb"), "-D", str(data), "-U", ADMIN,
                   f"--pwfile={folder / 'pw'}", "--auth=scram-sha-256", "-E", "UTF8",
                   "--locale=C.UTF-8", "--no-sync"], folder / "initdb.log")  # fmt: skip
        port = free_port()
        settings = {"listen_addresses": "127.0.0.1", "port": port,
                    "unix_socket_directories": "", "fsync": "off", "full_page_writes": "off",
                    "shared_buffers": "32MB", "max_connections": 200}  # fmt: skip
        command = [str(bin_dir / "postgres"), "-D", str(data)]
        command += [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        server = Server(folder, port, command, user)
        server.start()
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _as(user: str | None, command: list[str], log: Path) -> None:
    """Run `command` to its end as `user` (when root), or fail with its output."""
    with spawned(command, log=log, user=user) as process:
        if process.wait(timeout=120) != 0:
            raise RuntimeError(f"{command[0]} failed: {log.read_text()[-2000:]}")


def _wait_ready(process: subprocess.Popen, server: Server, wait: float = 60) -> None:
    import psycopg

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"postgres exited: {(server.folder / 'server.log').read_text()}")
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            time.sleep(0.2)
    raise RuntimeError(f"postgres not ready after {wait} s")


def admin(server: Server, *statements: str, database: str = "postgres") -> None:
    """Run `statements` one by one as the cluster's superuser, each outside a transaction."""
    import psycopg

    with psycopg.connect(server.url(database), autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)


_made = iter(range(1, 1_000_000))


@contextmanager
def database(server: Server) -> Iterator[str]:
    """A new empty database on `server`, its URL; dropped after, with this process's pool
    and listener on it closed first."""
    from weave.loom.store_pg import StoreServer

    name = f"t{os.getpid()}_{next(_made)}"
    admin(server, f"CREATE DATABASE {name}")
    url = server.url(name)
    try:
        yield url
    finally:
        StoreServer(url, 1000).close()
        admin(server, f"DROP DATABASE {name} WITH (FORCE)")
