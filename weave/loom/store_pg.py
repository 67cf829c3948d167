"""The story store on a PostgreSQL server (`[data] url = "postgresql://..."`): its tables,
its connections, its notifications, and its errors (the `weave.loom.store_sql.Database`
for a group whose page runs as several processes; SQLite's is `weave.loom.store_file`).

The tables are SQLite's, in a schema of their own (`lloom`, so the database may hold
others'), with PostgreSQL's types: a writer's text (a node's, a title) is kept as UTF-8
bytes (`bytea`), which hold any character, NUL too (`weave.loom.store_pg_schema`, which
creates, checks and migrates them). `lloom.meta` says the schema is LLooM's and its
version; opening checks it under an advisory lock (several processes may start at once).
Each transaction names its writer (SQL's `writer()` reads it) and how long it waits for a
lock; a write holds the story's row (`FOR UPDATE`), so writers of one story take turns and
writers of different stories do not wait.

A process holds one connection pool per database (psycopg_pool, `_Server`), shared by
every `StoreServer` of that URL (a writer's view is the same pool), closed by
`StoreServer.close`, and, once a page watches a story, one connection that LISTENs:
`Db.grew` sends `NOTIFY lloom` with the story and its node count, delivered when the
write commits, to every process (`Listener`). Every psycopg error becomes the
`StoreError` that says what to check (`from_postgres`): down, full, read-only, the login
refused, locked; the URL's password is never in a message (`weave.redaction`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from weave.loom.store_errors import (
    DatabaseLocked,
    DatabaseUnavailable,
    InvalidInput,
    LoginRefused,
    StorageFailed,
    StorageUnwritable,
    StoreError,
)
from weave.loom.store_pg_schema import OPENING_LOCK, SCHEMA, checked_schema
from weave.loom.store_sql import LOCAL_WRITER, Db, Rows
from weave.redaction import redacted

CHANNEL = "lloom"  # what `Db.grew` notifies and `Listener` listens to
POOL_SIZE = 8  # connections a process may hold to one database at most
CONNECT_S = 5.0  # how long a new connection may take
LISTEN_WAIT_S = 0.5  # how long the listener waits for notifications before looking up
# What libpq says, with no SQLSTATE, when a connection is refused at the login, or names a
# database the server lacks.
REFUSED = re.compile(r"authentication failed|no pg_hba\.conf entry|role \".*\" does not exist|"
                     r"no password supplied", re.IGNORECASE)  # fmt: skip
NO_DATABASE = re.compile(r"database \".*\" does not exist", re.IGNORECASE)


@lru_cache(maxsize=256)
def _placeheld(statement: str) -> str:
    """The store's SQL (`?` placeholders) as psycopg takes it (`%s`, a literal % doubled)."""
    return statement.replace("%", "%%").replace("?", "%s")


class PgDb(Db):
    """A PostgreSQL connection inside one transaction (`weave.loom.store_sql.Db`)."""

    def __init__(self, connection: psycopg.Connection, *, writing: bool) -> None:
        self.connection = connection
        self.locked = " FOR UPDATE OF s" if writing else ""

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Rows:
        return self.connection.execute(_placeheld(statement), tuple(params))

    def executemany(self, statement: str, params: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(row) for row in params]
        if rows:
            with self.connection.cursor() as cursor:
                cursor.executemany(_placeheld(statement), rows)

    def opening(self, column: str, size: int) -> str:
        return f"substr({column}, 1, {int(size)})"  # bytea: bytes, as SQLite's BLOB cast

    def text(self, value: str) -> bytes:
        return value.encode("utf-8")

    def grew(self, story_id: str, nodes: int) -> None:
        self.execute("SELECT pg_notify(?, ?)", (CHANNEL, f"{story_id} {int(nodes)}"))


class Listener:
    """The process's one LISTEN connection to a database, on a thread of its own: how many
    nodes each story has, as the writers' transactions announce it (`PgDb.grew`). While it
    is not connected (the server down or restarting) it knows nothing, and `nodes` counts
    by a query; what it missed meanwhile is forgotten, so nothing stale is answered."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._generation = 0  # one more each time it begins listening
        self._live = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lloom-listener", daemon=True)
        self._thread.start()

    def nodes(self, story_id: str, count: Callable[[], int]) -> int:
        """How many nodes the story has: as last announced, else `count()` (kept, when the
        listener was listening through the whole query)."""
        with self._lock:
            known, generation, live = self._counts.get(story_id), self._generation, self._live
        if known is not None:
            return known
        counted = count()
        with self._lock:
            if live and self._live and self._generation == generation:
                counted = max(counted, self._counts.get(story_id, 0))
                self._counts[story_id] = counted
        return counted

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * LISTEN_WAIT_S + CONNECT_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            # A server that cannot be reached is not this thread's to report: `nodes`
            # counts by a query meanwhile, and that query's error is the page's to show.
            with suppress(psycopg.Error):
                self._listen()
            with self._lock:
                self._live = False
                self._counts.clear()
            self._stop.wait(1.0)

    def _listen(self) -> None:
        with psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_S) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            with self._lock:
                self._generation, self._live = self._generation + 1, True
            while not self._stop.is_set():
                for note in conn.notifies(timeout=LISTEN_WAIT_S):
                    self._heard(note.payload)

    def _heard(self, payload: str) -> None:
        story_id, _, nodes = payload.rpartition(" ")
        if story_id and nodes.isdigit():  # else not one `grew` sent: another program's
            with self._lock:
                self._counts[story_id] = max(int(nodes), self._counts.get(story_id, 0))


@dataclass
class _Server:
    """What a process holds for one database: its pool, and its listener once asked for."""

    pool: ConnectionPool
    listener: Listener | None = None


CONNECTION = {"autocommit": True, "row_factory": dict_row}  # each transaction is begun here
_SERVERS: dict[str, _Server] = {}  # the URL -> the pool: one per database, not per store
_SERVERS_LOCK = threading.Lock()


def _configure(connection: psycopg.Connection) -> None:
    """A new pooled connection finds LLooM's tables first."""
    connection.execute(f"SET search_path TO {SCHEMA}")


@dataclass(frozen=True)
class StoreServer:
    """The database at `url` as `writer` sees it; a lock is waited for `busy_ms` ms, and a
    connection (the server down) as long."""

    url: str
    busy_ms: int
    writer: str = LOCAL_WRITER
    _secrets: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        try:
            parts = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as e:
            raise StorageUnwritable(f"the database URL cannot be read: {redacted(str(e))}; "
                                    "check [data] url or LLOOM_DATABASE_URL") from e  # fmt: skip
        object.__setattr__(self, "_secrets", (str(parts.get("password") or ""),))

    @property
    def where(self) -> str:
        """The database as people read it: postgresql://user@host:port/name, no password."""
        parts = conninfo_to_dict(self.url)
        user = f"{parts['user']}@" if parts.get("user") else ""
        port = f":{parts['port']}" if parts.get("port") else ""
        return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"

    def as_writer(self, writer: str) -> StoreServer:
        return replace(self, writer=writer)

    # -- connections ----------------------------------------------------------------------
    def _server(self) -> _Server:
        with _SERVERS_LOCK:
            server = _SERVERS.get(self.url)
            if server is None:
                pool = ConnectionPool(
                    self.url, min_size=1, max_size=POOL_SIZE, open=False, name="lloom",
                    kwargs={"connect_timeout": CONNECT_S, **CONNECTION},
                    configure=_configure, check=ConnectionPool.check_connection,
                )  # fmt: skip
                pool.open(wait=False)
                server = _SERVERS[self.url] = _Server(pool)
            return server

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection, given back after; any psycopg error as a `StoreError`."""
        try:
            with self._server().pool.connection(timeout=self.busy_ms / 1000) as connection:
                yield connection
        except PoolTimeout as e:
            raise self._unreachable() from e
        except psycopg.Error as e:
            raise from_postgres(e, self.where, self.busy_ms, self._secrets) from e

    def _unreachable(self) -> StoreError:
        """Why no connection came in time: one made directly says (down, the login refused,
        no such database); if it works, this process's connections were all busy."""
        try:
            psycopg.connect(self.url, connect_timeout=CONNECT_S).close()
        except psycopg.Error as e:
            return from_postgres(e, self.where, self.busy_ms, self._secrets)
        return DatabaseLocked(
            f"all {POOL_SIZE} connections of this page to the database at {self.where} stayed "
            f"busy for {self.busy_ms} ms, so this change was not saved (nothing saved before "
            "is lost); try again"
        )

    def read(self) -> AbstractContextManager[Db]:
        """One snapshot for several reads."""
        return self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", False)

    def write(self) -> AbstractContextManager[Db]:
        """One write transaction; a story read through the gate is held until it ends."""
        return self._transaction("BEGIN", True)

    @contextmanager
    def _transaction(self, begin: str, writing: bool) -> Iterator[Db]:
        setup = sql.SQL("{}; SELECT set_config('lloom.writer', {}, true); "
                        "SET LOCAL lock_timeout = {}").format(
            sql.SQL(begin), sql.Literal(self.writer), sql.Literal(f"{int(self.busy_ms)}ms"),
        )  # fmt: skip
        with self._connection() as connection:
            connection.execute(setup)
            try:
                yield PgDb(connection, writing=writing)
            except BaseException:
                with suppress(psycopg.Error):  # a dead connection: the pool drops it
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def reclaim(self) -> None:
        """VACUUM the purged story's tables, so their space is reused (best effort: the
        server's autovacuum does it later anyway; its failure is no news to the caller)."""
        with suppress(StoreError), self._connection() as connection:
            connection.execute("VACUUM nodes, suggestions, bookmarks, checkouts, shares, stories")

    def counter(self, story_id: str) -> Callable[[], int]:
        server = self._server()
        with _SERVERS_LOCK:
            if server.listener is None:
                server.listener = Listener(self.url)
            listener = server.listener

        def count() -> int:
            with self.read() as db:
                counted = "SELECT COUNT(*) AS n FROM nodes WHERE story_id = ?"
                return db.execute(counted, (story_id,)).fetchone()["n"]

        return lambda: listener.nodes(story_id, count)

    def close(self) -> None:
        """Close this process's pool and listener on the database (opened again when asked)."""
        with _SERVERS_LOCK:
            server = _SERVERS.pop(self.url, None)
        if server is not None:
            if server.listener is not None:
                server.listener.close()
            server.pool.close(timeout=CONNECT_S)

    # -- opening: is it ours, its schema ---------------------------------------------------
    def prepare(self) -> None:
        """Create the schema in a database without one, check it is ours, migrate an older
        one; a read-only database fails here, not at the first move (errors: `LoomStore`'s).
        On a connection of its own: the pool is opened only for a database that works, so
        one that does not is said once, not retried in the background."""
        try:
            connection = psycopg.connect(self.url, connect_timeout=CONNECT_S, **CONNECTION)
        except psycopg.Error as e:
            raise from_postgres(e, self.where, self.busy_ms, self._secrets) from e
        try:
            with connection:
                self._prepare(connection)
        except psycopg.Error as e:
            raise from_postgres(e, self.where, self.busy_ms, self._secrets) from e

    def _prepare(self, connection: psycopg.Connection) -> None:
        _configure(connection)
        connection.execute("BEGIN")
        connection.execute(f"SELECT pg_advisory_xact_lock({OPENING_LOCK})")
        checked_schema(connection, self.where)
        connection.execute("UPDATE meta SET version = version")  # may it write?
        connection.execute("COMMIT")


def from_postgres(e: Exception, where: str, busy_ms: int, secrets: tuple[str, ...]) -> StoreError:
    """The `StoreError` that says what to check about `e`, raised by the database `where`;
    one line, no password in it."""
    state = getattr(e, "sqlstate", None) or ""
    text = " ".join(redacted(str(e), secrets).split()) or type(e).__name__
    kept = "nothing saved before is lost"
    if state in ("55P03", "40P01", "40001", "57014"):
        return DatabaseLocked(
            f"the story at {where} stayed locked by another writer for {busy_ms} ms, so this "
            f"change was not saved ({kept}); try again"
        )
    if state == "25006":
        return StorageUnwritable(
            f"the database at {where} is read-only ({text}), so this change was not saved "
            f"({kept}); check that the server is not a standby or set read-only"
        )
    if state == "42501":
        return StorageUnwritable(
            f"the database at {where} does not let its user do this ({text}): grant the user "
            f"the rights on the database and its schema {SCHEMA!r}"
        )
    if state.startswith("53") and state != "53300":
        return StorageFailed(
            f"the database server at {where} is full ({text}): free space on its disk; {kept}"
        )
    if state.startswith("28") or REFUSED.search(text):
        return LoginRefused(
            f"the database at {where} refused the login ({text}): check the user and the "
            "password in [data] url (or LLOOM_DATABASE_URL) and the server's pg_hba.conf"
        )
    if state == "3D000" or NO_DATABASE.search(text):
        return DatabaseUnavailable(
            f"the database at {where} does not exist ({text}): create it (createdb) or name "
            "another in [data] url"
        )
    if isinstance(e, psycopg.OperationalError) or state.startswith(("08", "57P", "53300")):
        return DatabaseUnavailable(
            f"the database at {where} cannot be reached ({text}): check that the server is "
            f"running and this machine may connect to it; {kept}"
        )
    if isinstance(e, psycopg.DataError) or state.startswith("22"):
        return InvalidInput(f"a value cannot be kept in the database at {where}: {text}")
    if state.startswith("54"):
        return InvalidInput(f"a value is too big for the database at {where}")
    return StoreError(f"the story store at {where} failed: {text}")
