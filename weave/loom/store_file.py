"""The story store's SQLite file: its tables, opening it, and every connection on it (the
embedded `weave.loom.store_sql.Database`; PostgreSQL's is `weave.loom.store_pg`).

The tables: `stories` (a row a story: title, times, settings, root, the owner's cursor, and
the owner, the writer who may see it), `nodes` (only ever added: triggers refuse to change
one, or to delete one of a story not deleted), `shares` (the other writers a story is
shared with, to read or to co-write, and each one's cursor), each writer's `checkouts` and
`bookmarks` (`PLACE_OF_OWNER` the owner's), `suggestions`, and `writers` (each login's
verified address). Older files are migrated here (`_migrate`). Opening reads the header
with plain file I/O first: a foreign or damaged file is left untouched, a newer or older
one refused; a new one gets the schema. Every connection is made here (WAL,
`synchronous=FULL`, foreign keys, a busy timeout, one per operation) for one writer, whom
SQL's `writer()` names; any `sqlite3.Error` on it becomes the `StoreError` saying what to
check. SQLite serves one machine: whole-file write locks, and `counter` counts a story's
nodes each time it is asked.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from weave.loom.store_errors import (
    NewerDatabase,
    NotLoomDatabase,
    StorageUnwritable,
    StoreError,
    from_sqlite,
    not_ours,
)
from weave.loom.store_sql import LOCAL_WRITER, PLACE_OF_OWNER, SCHEMA_VERSION, Db, Rows

FILE_NAME = "stories.sqlite3"
APPLICATION_ID = 0x4C6F6F6D  # "Loom": marks the file as ours
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first bytes of every SQLite file
OWNER = f"owner TEXT NOT NULL DEFAULT '{LOCAL_WRITER}'"  # the writer who may see a story
WRITERS = """CREATE TABLE writers (
        writer TEXT PRIMARY KEY,  -- a login's issuer and subject (weave.access.Login)
        email TEXT NOT NULL,      -- the address the provider verified, as last seen
        seen REAL NOT NULL        -- their last login
    )"""

PLACES = {  # each writer's place in a story besides the cursor: checked-out children, marks
    "checkouts": f"""story_id TEXT NOT NULL, writer TEXT NOT NULL DEFAULT '{PLACE_OF_OWNER}',
        parent TEXT NOT NULL, child TEXT NOT NULL,
        PRIMARY KEY (story_id, writer, parent),
        FOREIGN KEY (story_id, child) REFERENCES nodes(story_id, id)""",
    "bookmarks": f"""story_id TEXT NOT NULL, writer TEXT NOT NULL DEFAULT '{PLACE_OF_OWNER}',
        node TEXT NOT NULL,
        PRIMARY KEY (story_id, writer, node),
        FOREIGN KEY (story_id, node) REFERENCES nodes(story_id, id)""",
}
SHARES = """CREATE TABLE shares (
        story_id TEXT NOT NULL REFERENCES stories(id),
        writer TEXT NOT NULL,       -- a login's key, or an address until its login comes
        may_write INTEGER NOT NULL, -- 1: co-writing; 0: reading
        cursor TEXT,                -- where they are; NULL: where the owner is
        PRIMARY KEY (story_id, writer)
    )"""

SCHEMA = (
    f"""CREATE TABLE stories (
        id TEXT PRIMARY KEY,
        title TEXT,           -- NULL: the first words of its opening (story_infos)
        created REAL NOT NULL,
        updated REAL NOT NULL,
        deleted REAL,         -- when it was deleted; NULL while it is not
        settings TEXT,        -- JSON object
        root TEXT NOT NULL,
        cursor TEXT NOT NULL,
        {OWNER}
    )""",
    """CREATE TABLE nodes (
        story_id TEXT NOT NULL REFERENCES stories(id),
        id TEXT NOT NULL,
        seq INTEGER NOT NULL,     -- 0 (the root), 1, 2, ...: the order they were added
        parent TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('typed', 'edited', 'accepted', 'sampled')),
        token_ids TEXT,           -- JSON list of ints
        model TEXT,
        params TEXT,              -- JSON object
        score REAL,
        created REAL NOT NULL,
        text TEXT NOT NULL,
        provenance TEXT,          -- JSON object; NULL: made before provenance was kept
        PRIMARY KEY (story_id, id),
        UNIQUE (story_id, seq),
        FOREIGN KEY (story_id, parent) REFERENCES nodes(story_id, id)
    )""",
    *(f"CREATE TABLE {table} ({columns})" for table, columns in PLACES.items()),
    SHARES,
    """CREATE TABLE suggestions (
        story_id TEXT NOT NULL, node TEXT NOT NULL,
        data TEXT NOT NULL,       -- JSON: the search shown at this node
        PRIMARY KEY (story_id, node),
        FOREIGN KEY (story_id, node) REFERENCES nodes(story_id, id)
    )""",
    WRITERS,
    """CREATE TRIGGER nodes_stay BEFORE UPDATE ON nodes
    BEGIN SELECT RAISE(ABORT, 'nodes are never changed'); END""",
    """CREATE TRIGGER nodes_go_with_purge BEFORE DELETE ON nodes
    WHEN (SELECT deleted FROM stories WHERE id = OLD.story_id) IS NULL
    BEGIN SELECT RAISE(ABORT, 'only a deleted story can be purged'); END""",
    """CREATE TRIGGER stories_go_with_purge BEFORE DELETE ON stories
    WHEN OLD.deleted IS NULL
    BEGIN SELECT RAISE(ABORT, 'only a deleted story can be purged'); END""",
)


def _placed(table: str, kept: str) -> tuple[str, ...]:
    """Schema 6's `table` made the owner's places: copied into its new shape (a key cannot
    gain a column in place), the columns `kept` as they were."""
    return (f"CREATE TABLE {table}_7 ({PLACES[table]})",
            f"INSERT INTO {table}_7 ({kept}) SELECT {kept} FROM {table}",
            f"DROP TABLE {table}", f"ALTER TABLE {table}_7 RENAME TO {table}")  # fmt: skip


# What a file of an older schema gains, step by step: schema 3's stories become the local
# writer's; schema 4 (owners named by e-mail address) gains the writers table: a story an
# address owns stays so until the writer the provider verified that address for logs in
# and takes it over (`weave.loom.store_writers.sign_in`), so none is lost or goes to the
# wrong login; schema 5's nodes keep no provenance (NULL: "unknown provenance"); schema
# 6's checkouts and bookmarks become the owner's places, and no story is shared yet.
MIGRATIONS = {
    3: (f"ALTER TABLE stories ADD COLUMN {OWNER}",),
    4: (WRITERS,),
    5: ("ALTER TABLE nodes ADD COLUMN provenance TEXT",),
    6: (
        *_placed("checkouts", "story_id, parent, child"),
        *_placed("bookmarks", "story_id, node"),
        SHARES,
    ),
}


def _migrate(db: sqlite3.Connection) -> None:
    """Bring an older file to `SCHEMA_VERSION`, in one transaction (another process may be
    doing it at the same time: the version is read again under the write lock)."""
    db.execute("BEGIN IMMEDIATE")
    version = db.execute("PRAGMA user_version").fetchone()[0]
    while version in MIGRATIONS:
        for statement in MIGRATIONS[version]:
            db.execute(statement)
        version += 1
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.execute("COMMIT")


class SqliteDb(Db):
    """An SQLite connection inside one transaction (`weave.loom.store_sql.Db`)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return self.connection.execute(sql, params)

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        self.connection.executemany(sql, params)

    def opening(self, column: str, size: int) -> str:
        return f"substr(CAST({column} AS BLOB), 1, {int(size)})"

    def secure_delete(self) -> None:
        self.connection.execute("PRAGMA secure_delete = ON")


@dataclass(frozen=True)
class StoreFile:
    """The database at `path` as `writer` sees it; its locks are waited for `busy_ms` ms."""

    path: Path
    busy_ms: int
    writer: str = LOCAL_WRITER

    @property
    def where(self) -> str:
        return str(self.path.parent)  # the data folder, as the writer chose it

    def as_writer(self, writer: str) -> StoreFile:
        return replace(self, writer=writer)

    # -- connections ----------------------------------------------------------------------
    @contextmanager
    def connection(self, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        """A new connection, closed after; an `sqlite3.Error` comes out as a `StoreError`."""
        uri, db = f"{self.path.as_uri()}?mode={'rwc' if create else 'rw'}", None
        try:
            db = sqlite3.connect(uri, uri=True, timeout=self.busy_ms / 1000, isolation_level=None)
            db.row_factory, writer = sqlite3.Row, self.writer
            db.create_function("writer", 0, lambda: writer, deterministic=True)
            for pragma in (f"busy_timeout = {int(self.busy_ms)}", "foreign_keys = ON",
                           "synchronous = FULL"):  # fmt: skip
                db.execute(f"PRAGMA {pragma}")
            yield db
        except sqlite3.Error as e:
            raise from_sqlite(e, self.path, self.busy_ms) from e
        finally:
            if db is not None:
                db.close()

    def read(self) -> AbstractContextManager[Db]:
        """One snapshot for several reads."""
        return self._transaction("BEGIN")

    def write(self) -> AbstractContextManager[Db]:
        """One write transaction; the write lock is taken at once, so it cannot deadlock."""
        return self._transaction("BEGIN IMMEDIATE")

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Db]:
        with self.connection() as db:
            db.execute(begin)
            try:
                yield SqliteDb(db)
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def reclaim(self) -> None:
        """The WAL still holds a purged story's pages until a checkpoint. A reader holding
        them only delays it, so this is best effort, and its failure is no news to the caller."""
        with suppress(StoreError), self.connection() as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def counter(self, story_id: str) -> Callable[[], int]:
        def nodes() -> int:
            with self.read() as db:
                counted = "SELECT COUNT(*) AS n FROM nodes WHERE story_id = ?"
                return db.execute(counted, (story_id,)).fetchone()["n"]

        return nodes

    def close(self) -> None:
        """Nothing to close: every connection is closed after its operation."""

    # -- opening: is it ours, its schema ---------------------------------------------------
    def prepare(self) -> None:
        """Make the folder and the file when missing; check it is ours (errors: `LoomStore`'s)."""
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageUnwritable(
                f"cannot create the data folder {folder}: {e.strerror}; "
                "check the path and its permissions"
            ) from e
        self._create_when_new()
        with self.connection() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise NewerDatabase(
                    f"the database at {self.path} was written by a newer LLooM (schema "
                    f"{version}, this one reads {SCHEMA_VERSION}); it was left untouched; "
                    "upgrade LLooM to open it"
                )
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise not_ours(self.path)
            if version in MIGRATIONS:
                _migrate(db)
            elif version < SCHEMA_VERSION:  # no release wrote one: nothing to migrate
                raise NotLoomDatabase(
                    f"the database at {self.path} has schema {version}, from a development "
                    "build of LLooM that no release read; it was left untouched"
                )
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN IMMEDIATE")  # a read-only file or folder fails here, not later
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("ROLLBACK")

    def _create_when_new(self) -> None:
        """Write the schema into a new or empty file (another process may be first). The
        header is read with plain file I/O first, so SQLite never opens a foreign file."""
        try:
            with open(self.path, "rb") as f:
                head = f.read(100)
        except FileNotFoundError:
            head = b""
        except OSError as e:
            raise StorageUnwritable(
                f"cannot read the database at {self.path}: {e.strerror}; check its permissions"
            ) from e
        if head:  # a file already: ours, an empty SQLite file (still new) or foreign
            if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
                raise not_ours(self.path)
            app_id = int.from_bytes(head[68:72], "big")
            if app_id == APPLICATION_ID:
                return
            if app_id != 0 or int.from_bytes(head[40:44], "big") != 0:
                raise not_ours(self.path)
        with self.connection(create=True) as db:
            db.execute("BEGIN IMMEDIATE")
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            if app_id != 0 or db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
                db.execute("ROLLBACK")
                if app_id != APPLICATION_ID:
                    raise not_ours(self.path)
                return
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            for statement in SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
