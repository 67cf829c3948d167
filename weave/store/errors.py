"""The story store's errors: `StoreError` and the named cases a caller may tell apart.

This module owns the exception classes. Every failure of the store is a `StoreError` (a
`weave.session.BookError`) whose message says what to check; the modules that raise them
write the messages, and the page shows them (`weave.session`, `lloom.py`).
"""

from __future__ import annotations

from weave.session import BookError


class StoreError(BookError):
    """The store could not do its job; the message says what to check."""


class NotLoomDatabase(StoreError):
    """The file is not a LLooM database, or is damaged. It was not written to."""


class NewerDatabase(StoreError):
    """The file was written by a newer LLooM. It was not written to."""


class DatabaseLocked(StoreError):
    """Another program held the database longer than the busy timeout."""


class StorageUnwritable(StoreError):
    """The data folder or the file cannot be created, opened or written."""


class StorageFailed(StoreError):
    """The disk refused a write (full, I/O error); what was saved before is kept."""


class StoryNotFound(StoreError):
    """No story has this id."""


class NotDeleted(StoreError):
    """Purge is for deleted stories only."""


class DamagedStory(StoreError):
    """A story's saved values cannot be read back (its message says "cannot be read")."""


class InvalidInput(StoreError, ValueError):
    """An argument the store cannot keep (wrong type, unknown kind, no such state)."""


class BadImport(StoreError, ValueError):
    """The data given to `import_json` is not a story `export_json` wrote."""


class _Unreadable(Exception):
    """A stored value that does not decode; becomes `DamagedStory` with its story's id."""
