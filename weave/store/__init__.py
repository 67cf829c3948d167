"""The story store: every story and its whole history in SQLite, in the data folder.

This package owns the file `<data folder>/stories.sqlite3`: its schema and migrations,
what undo and redo mean for a saved story, and a story's JSON form for export and
import. It leaves to others where the data folder is (`weave.config`), what token ids
mean (the backend), what the settings and the tree hold (the page and `weave.session`:
here they are opaque JSON-able dicts), the in-memory history of the story being written
(`weave.session`, which saves through `Store`, its `Book`), and how errors are shown.
Every failure is a `StoreError` (a `weave.session.BookError`) subclass whose message
says what to check; a failed write changes nothing that was saved before.

Its modules, each saying more in its own docstring:
- `story_store`: `StoryStore`, the API (stories, states, undo and redo, export, import);
- `book`: `Store`, `StoryStore` as the session's `Book`;
- `values`: the dataclasses it returns, a log row, and the checks on its arguments;
- `log`: the queries over a story's append-only log, where undo and redo are rows;
- `export`: the JSON export document, written and checked;
- `encoding`: how any str is kept exactly, in SQLite and in ASCII JSON;
- `schema`: the tables, how a file is known to be ours, and migrations;
- `database`: the file's connections and transactions, and SQLite's errors;
- `errors`: `StoreError` and its subclasses.

The names imported here are the package's public ones. Names with a leading underscore
belong to the package: its modules share them, and nothing outside it should use them.
"""

from weave.store.book import Store
from weave.store.database import FILE_NAME
from weave.store.errors import (
    BadImport,
    DamagedStory,
    DatabaseLocked,
    InvalidInput,
    NewerDatabase,
    NotDeleted,
    NotLoomDatabase,
    StorageFailed,
    StorageUnwritable,
    StoreError,
    StoryNotFound,
)
from weave.store.export import EXPORT_FORMAT, EXPORT_VERSION
from weave.store.log import TITLE_BYTES
from weave.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA, SCHEMA_VERSION
from weave.store.story_store import StoryStore
from weave.store.values import (
    FIRST_KINDS,
    MOVE_KINDS,
    SAVE_KINDS,
    StoryInfo,
    StoryState,
    Timeline,
)

BUSY_MS = 5000  # read by `database` at every connection, so tests can shorten it

__all__ = [
    "APPLICATION_ID",
    "BUSY_MS",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "FILE_NAME",
    "FIRST_KINDS",
    "MIGRATIONS",
    "MOVE_KINDS",
    "SAVE_KINDS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TITLE_BYTES",
    "BadImport",
    "DamagedStory",
    "DatabaseLocked",
    "InvalidInput",
    "NewerDatabase",
    "NotDeleted",
    "NotLoomDatabase",
    "StorageFailed",
    "StorageUnwritable",
    "Store",
    "StoreError",
    "StoryInfo",
    "StoryNotFound",
    "StoryState",
    "StoryStore",
    "Timeline",
]
