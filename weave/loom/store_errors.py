"""The story store's errors: the `StoreError` family, and the one translation of an
`sqlite3.Error` into the `StoreError` whose message says what to check (PostgreSQL's is
`weave.loom.store_pg.from_postgres`). The page and the command line turn them into one
message, at the edge.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class StoreError(RuntimeError):
    """The store could not do its job; the message says what to check."""


class NotLoomDatabase(StoreError):
    """The file is not a LLooM database, or is damaged. It was not written to."""


class NewerDatabase(StoreError):
    """The file was written by a newer LLooM. It was not written to."""


class DatabaseLocked(StoreError):
    """Another program held the database longer than the busy timeout."""


class StorageUnwritable(StoreError):
    """The data folder or the file cannot be created, opened or written."""


class DatabaseUnavailable(StoreError):
    """The database server cannot be reached (down, restarting, or the network)."""


class LoginRefused(StoreError):
    """The database server refused the login (user, password, or what it allows)."""


class StorageFailed(StoreError):
    """The disk refused a write (full, I/O error); what was saved before is kept."""


class StoryNotFound(StoreError):
    """No story has this id."""


class ReadOnlyStory(StoreError):
    """The story was shared with this writer to read: they may move about it, not add to it."""


class NotOwner(StoreError):
    """Only a story's owner may rename, delete, give or share it."""


class NotDeleted(StoreError):
    """Purge is for deleted stories only."""


class DamagedStory(StoreError):
    """A story's saved values cannot be read back."""


class InvalidInput(StoreError, ValueError):
    """A value the store cannot keep (a lone surrogate, a move that removes a node...)."""


class SharedAddress(InvalidInput):
    """A verified address more than one login has (`logins`, each "issuer subject"): a
    story given to it would go to one of them by a guess."""

    def __init__(self, email: str, logins: tuple[str, ...]) -> None:
        self.email, self.logins = email, logins
        super().__init__(
            f"{email} is the verified address of {len(logins)} logins ({'; '.join(logins)}): "
            "give the story to one of them by its issuer and subject"
        )


class BadImport(StoreError, ValueError):
    """The data given to `weave.interop.files.import_file` is not a file LLooM can read."""


def not_ours(path: Path) -> NotLoomDatabase:
    """The error for a file at `path` that is foreign or damaged (and left untouched)."""
    return NotLoomDatabase(
        f"the database at {path} is not a LLooM database or is damaged; it was "
        "left untouched; move it aside (or choose another data folder) and start again"
    )


def from_sqlite(e: sqlite3.Error, path: Path, busy_ms: int) -> StoreError:
    """The `StoreError` that says what to check about `e`, raised on the file at `path`."""
    name, text = getattr(e, "sqlite_errorname", "") or "", str(e)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return DatabaseLocked(
            f"the database at {path} stayed locked by another program for "
            f"{busy_ms} ms, so this change was not saved (nothing saved before is "
            "lost); close other programs using it and try again"
        )
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return not_ours(path)
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        return StorageUnwritable(
            f"cannot write the database at {path} ({text}): check that the data "
            f"folder {path.parent} and its files are writable by this user (permissions, "
            "a read-only disk)"
        )
    if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")):
        return StorageFailed(
            f"writing the database at {path} failed ({text}): check the free space "
            "and the disk; nothing saved before is lost"
        )
    if name.startswith("SQLITE_TOOBIG"):
        return InvalidInput(f"a value is too big for the database at {path}")
    return StoreError(f"the story store at {path} failed: {text}")
