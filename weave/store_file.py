"""The story store's SQLite file: opening it, and every connection and transaction on it.

Opening checks the header with plain file I/O before SQLite reads it (a foreign or
damaged file is left untouched, a newer one refused), writes the schema into a new file,
and migrates one of schema 2 (`weave.store_migration`). Every connection is made here:
WAL, `synchronous=FULL`, foreign keys, a busy timeout, one connection per operation, and
any `sqlite3.Error` on it becomes the `StoreError` that says what to check
(`weave.store_errors.from_sqlite`). Each connection belongs to one writer: SQL's
`writer()` names them, and `weave.store_rows` reads and writes only that writer's stories.
What is read and written is `weave.store_rows`'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from weave.store_errors import (
    NewerDatabase,
    NotLoomDatabase,
    StorageUnwritable,
    StoreError,
    from_sqlite,
    not_ours,
)
from weave.store_migration import migrate
from weave.store_schema import (
    APPLICATION_ID,
    LOCAL_WRITER,
    SCHEMA,
    SCHEMA_VERSION,
    SQLITE_MAGIC,
)


@dataclass(frozen=True)
class StoreFile:
    """The database at `path`, whose locks are waited for `busy_ms` milliseconds, as
    `writer` sees it."""

    path: Path
    busy_ms: int
    writer: str = LOCAL_WRITER

    # -- connections ----------------------------------------------------------------------
    @contextmanager
    def connection(self, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        """A new connection, closed after; an `sqlite3.Error` comes out as a `StoreError`."""
        db = self._connect(create=create)
        try:
            yield db
        except sqlite3.Error as e:
            raise self.error(e) from e
        finally:
            db.close()

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        """One snapshot for several reads."""
        return self._transaction("BEGIN")

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction; the write lock is taken at once, so it cannot deadlock."""
        return self._transaction("BEGIN IMMEDIATE")

    def error(self, e: sqlite3.Error) -> StoreError:
        """The `StoreError` that says what to check about `e`."""
        return from_sqlite(e, self.path, self.busy_ms)

    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        uri = f"{self.path.as_uri()}?mode={'rwc' if create else 'rw'}"
        try:
            db = sqlite3.connect(uri, uri=True, timeout=self.busy_ms / 1000, isolation_level=None)
        except sqlite3.Error as e:
            raise self.error(e) from e
        try:
            db.row_factory = sqlite3.Row
            writer = self.writer
            db.create_function("writer", 0, lambda: writer, deterministic=True)
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_ms)}")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as e:
            db.close()  # a file that opened but will not take its settings
            raise self.error(e) from e
        return db

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self.connection() as db:
            db.execute(begin)
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- opening: is it ours, its schema, its migration ---------------------------------
    def prepare(self) -> None:
        """Make the folder and the file when missing, check it is ours, and migrate it.

        Raises `StorageUnwritable`, `NotLoomDatabase` (a foreign or damaged file, left
        untouched), `NewerDatabase` or `DatabaseLocked`.
        """
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageUnwritable(
                f"cannot create the data folder {folder}: {e.strerror}; "
                "check the path and its permissions"
            ) from e
        if self._is_new():
            self._initialise()
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
            if version < SCHEMA_VERSION:
                try:
                    migrate(db, self.path, version)
                except ValueError as e:  # a saved value its replay cannot read
                    raise NotLoomDatabase(
                        f"the database at {self.path} cannot be migrated ({e}); it was left "
                        "untouched"
                    ) from e
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN IMMEDIATE")  # a read-only file or folder fails here, not later
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("ROLLBACK")

    def _is_new(self) -> bool:
        """Whether the file is new; raises `NotLoomDatabase` for one that is not ours.

        Reads the header with plain file I/O, so a foreign file is never opened by SQLite.
        """
        try:
            with open(self.path, "rb") as f:
                head = f.read(100)
        except FileNotFoundError:
            return True
        except OSError as e:
            raise StorageUnwritable(
                f"cannot read the database at {self.path}: {e.strerror}; check its permissions"
            ) from e
        if not head:
            return True
        if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
            raise not_ours(self.path)
        app_id = int.from_bytes(head[68:72], "big")
        if app_id == APPLICATION_ID:
            return False
        if app_id == 0 and int.from_bytes(head[40:44], "big") == 0:  # an empty SQLite file
            return True
        raise not_ours(self.path)

    def _initialise(self) -> None:
        """Write the schema into a new or empty file (another process may be first)."""
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
