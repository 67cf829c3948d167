"""The story store's file: connections, transactions, and SQLite's errors as `StoreError`s.

The file runs in WAL mode with a busy timeout and `synchronous=FULL`, one connection per
operation (so threads and processes can share it), every write one `BEGIN IMMEDIATE`
transaction, so a failed write changes nothing that was saved before. The busy timeout
is `weave.store.BUSY_MS`, read at every connection (tests shorten it).

This module owns where the file is and how it is opened for each operation, and turns
every `sqlite3.Error` into the `StoreError` subclass whose message says what to check.
It leaves what the file holds, and whether a file is ours, to `weave.store.schema`, and
the queries to `weave.store.log`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from weave.store.errors import (
    DamagedStory,
    DatabaseLocked,
    InvalidInput,
    NotLoomDatabase,
    StorageFailed,
    StorageUnwritable,
    StoreError,
    _Unreadable,
)
from weave.store.values import _check_id

FILE_NAME = "stories.sqlite3"


def _busy_ms() -> int | float:
    """`weave.store.BUSY_MS`, looked up now, so that a test's shorter timeout applies."""
    from weave import store  # late: the package imports this module

    return store.BUSY_MS


class Database:
    """The file `folder/stories.sqlite3`; the folder is made when missing.

    Holds no connection: each `read` or `write` opens one, so share it between threads.
    Making the folder raises `StorageUnwritable`; the file is opened by `connect`.
    """

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = Path(folder).expanduser().absolute()
        self.path = self.folder / FILE_NAME
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageUnwritable(
                f"cannot create the data folder {self.folder}: {e.strerror}; "
                "check the path and its permissions"
            ) from e

    def read(self, story_id: str | None = None) -> AbstractContextManager[sqlite3.Connection]:
        """One snapshot for several reads."""
        return self._transaction("BEGIN", _check_id(story_id))

    def write(self, story_id: str | None = None) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction; the write lock is taken at once, so it cannot deadlock."""
        return self._transaction("BEGIN IMMEDIATE", _check_id(story_id))

    def connect(self, *, create: bool = False) -> sqlite3.Connection:
        """A new connection in autocommit mode (`create`: make the file when missing)."""
        uri = f"{self.path.as_uri()}?mode={'rwc' if create else 'rw'}"
        busy_ms = _busy_ms()
        try:
            db = sqlite3.connect(uri, uri=True, timeout=busy_ms / 1000, isolation_level=None)
        except sqlite3.Error as e:
            raise self.error(e) from e
        db.row_factory = sqlite3.Row
        try:
            db.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as e:
            db.close()
            raise self.error(e) from e
        return db

    @contextmanager
    def _transaction(self, begin: str, story_id: str | None) -> Iterator[sqlite3.Connection]:
        db = self.connect()
        try:
            db.execute(begin)
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as e:
            raise self.error(e) from e
        except _Unreadable as e:
            raise DamagedStory(
                f"story {story_id} cannot be read: {e}; the database at {self.path} may be "
                "damaged: export what you can and keep a copy of the file"
            ) from e
        finally:
            db.close()

    # -- errors -------------------------------------------------------------------------
    def foreign(self) -> NotLoomDatabase:
        """The error for a file that is not ours, or is damaged."""
        return NotLoomDatabase(
            f"the database at {self.path} is not a LLooM database or is damaged; it was "
            "left untouched; move it aside (or choose another data folder) and start again"
        )

    def error(self, e: sqlite3.Error) -> StoreError:
        """The `StoreError` that says what to check about `e`."""
        name, text = getattr(e, "sqlite_errorname", "") or "", str(e)
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            return DatabaseLocked(
                f"the database at {self.path} stayed locked by another program for "
                f"{_busy_ms()} ms, so this change was not saved (nothing saved before is "
                "lost); close other programs using it and try again"
            )
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
            return self.foreign()
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
            return StorageUnwritable(
                f"cannot write the database at {self.path} ({text}): check that the data "
                f"folder {self.folder} and its files are writable by this user (permissions, "
                "a read-only disk)"
            )
        if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")):
            return StorageFailed(
                f"writing the database at {self.path} failed ({text}): check the free space "
                "and the disk; nothing saved before is lost"
            )
        if name.startswith("SQLITE_TOOBIG"):
            return InvalidInput(f"a value is too big for the database at {self.path}")
        return StoreError(f"the story store at {self.path} failed: {text}")
