"""The story store: every story and its whole history in SQLite, in the data folder.

This module owns the file `<data folder>/stories.sqlite3`: its schema and migrations,
what undo and redo mean for a saved story, and a story's JSON form for export and
import. It leaves to others where the data folder is (`weave.config`), what token ids
mean (the backend), what the settings and the tree hold (the page and `weave.session`:
here they are opaque JSON-able dicts), the in-memory history of the story being written
(`weave.session`, which saves through `Store`, its `Book`), and how errors are shown.

History is a log per story, only ever appended to. A row either writes a state (kind
"create", "import", "edit" or "accept": its text, maybe the token ids and the model they
belong to, and `parent`, the state it was made from) or goes back to one (kind "undo" or
"redo": `state`, the row whose state is current again). The current state is the one
the last row names, and the last row's number is the story's `version`. Like an editor:
the states from the first to the newest written one (following parents) are the branch
that undo and redo walk, undo to the current state's parent, redo to its child on the
branch; a save after an undo writes a state whose parent is the current one, so it
becomes the newest and the undone states leave the branch (redo no longer applies; their
rows stay, for `history` and export). A save equal to the current state (text, ids and
model) writes nothing. Triggers refuse to change any log row, or to delete one of a story
that is not deleted (purge). Reopening the file restores the pointer: it is the log.

A story's title is the first words of its first non-empty text until it is renamed
(renaming to blank goes back to that). Delete only marks a story; restore unmarks it;
purge removes a deleted story for real (secure_delete on, then the WAL truncated, best
effort: a reader holding an old snapshot keeps its copy until it lets go). Settings and
the tree are the latest ones, replaced on each save; they are not history, and saving
them is not an edit (the list's "last edited" order stays).

Text is stored as UTF-8 with `surrogatepass`, so every Python str (NUL, lone surrogates
such as '\\ud800', a surrogate pair written as two code points) comes back exactly;
settings and tree are JSON stored the same way. The export is ASCII JSON: lone surrogates
are `\\ud800` escapes, and the one str JSON cannot give back (a high surrogate followed
by a low one, which JSON reads as the character they spell) is written as
"\\u0000lloom-utf8-b64:" and its bytes in base64, as is any str that starts so. JSON values
come back as JSON gives them: tuples as lists, non-string keys as strings, infinite
log-probabilities as Python's `-Infinity`.

The file runs in WAL mode with a busy timeout and `synchronous=FULL`, one connection per
operation (so threads and processes can share it), every write one `BEGIN IMMEDIATE`
transaction. A file is opened only when its header says it is a LLooM database (SQLite
with our application id) and a quick check passes; anything else is never written to.
Every failure is a `StoreError` (a `weave.session.BookError`) subclass whose message
says what to check; a failed write changes nothing that was saved before.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from weave.session import BookError, Change, Entry, Saved, title_for

FILE_NAME = "stories.sqlite3"
SCHEMA_VERSION = 2
APPLICATION_ID = 0x4C6F6F6D  # "Loom": marks the file as ours
BUSY_MS = 5000  # read at every connection, so tests can shorten it
EXPORT_FORMAT = "lloom-story"
EXPORT_VERSION = 1
FIRST_KINDS = ("create", "import")  # how a story's first state is made
SAVE_KINDS = ("edit", "accept", "import")  # how a later state is made
MOVE_KINDS = ("undo", "redo")
TITLE_BYTES = 4096  # of the first text, read to make a title
_SQLITE_MAGIC = b"SQLite format 3\x00"
_ESCAPED = "\x00lloom-utf8-b64:"  # starts an exported str that JSON alone would not keep
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")

SCHEMA = (
    """CREATE TABLE stories (
        id TEXT PRIMARY KEY,
        title BLOB,          -- NULL: the first words of its first non-empty text
        created REAL NOT NULL,
        updated REAL NOT NULL,
        deleted REAL,        -- when it was deleted; NULL while it is not
        settings BLOB,       -- JSON object
        tree BLOB            -- JSON: the last search the page showed
    )""",
    """CREATE TABLE log (
        story_id TEXT NOT NULL REFERENCES stories(id),
        seq INTEGER NOT NULL,     -- 0, 1, 2, ...: the story's version after this row
        kind TEXT NOT NULL CHECK (kind IN
            ('create', 'import', 'edit', 'accept', 'undo', 'redo')),
        state INTEGER NOT NULL,   -- the row whose state is current after this one
        parent INTEGER,           -- a written state's: the state it was made from
        created REAL NOT NULL,
        model BLOB,
        token_ids TEXT,           -- JSON list of ints
        text BLOB,                -- last: the other columns are read without it
        PRIMARY KEY (story_id, seq),
        CHECK ((state = seq) = (text IS NOT NULL)),
        CHECK ((state = seq) = (kind NOT IN ('undo', 'redo'))),
        CHECK (state <= seq)
    )""",
    """CREATE TRIGGER log_rows_stay BEFORE UPDATE ON log
    BEGIN SELECT RAISE(ABORT, 'the story log is append-only'); END""",
    """CREATE TRIGGER log_rows_go_with_purge BEFORE DELETE ON log
    WHEN (SELECT deleted FROM stories WHERE id = OLD.story_id) IS NULL
    BEGIN SELECT RAISE(ABORT, 'only a deleted story can be purged'); END""",
    """CREATE TRIGGER stories_go_with_purge BEFORE DELETE ON stories
    WHEN OLD.deleted IS NULL
    BEGIN SELECT RAISE(ABORT, 'only a deleted story can be purged'); END""",
)


# -- errors -------------------------------------------------------------------------------
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


# -- values -------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoryState:
    """A story at one version: the state current after log row `version`."""

    story_id: str
    version: int
    text: str
    token_ids: tuple[int, ...] | None  # exact ids of `text` for `model`, when known
    model: str | None
    kind: str  # how this version came: create, import, edit, accept, undo, redo
    created_at: float  # seconds since the epoch


@dataclass(frozen=True)
class StoryInfo:
    """A story as a list shows it."""

    id: str
    title: str
    updated_at: float  # last change to its text or title
    deleted: bool
    history_len: int  # rows in its log: the number of versions
    created_at: float


@dataclass(frozen=True)
class Timeline:
    """The states undo and redo walk, oldest first, and the index of the current one."""

    states: tuple[StoryState, ...]
    position: int


@dataclass(frozen=True)
class _Row:
    """One log row as stored (text rows carry their state; move rows name one)."""

    seq: int
    kind: str
    state: int
    parent: int | None
    created: float
    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    model: str | None = None


# -- the store ----------------------------------------------------------------------------
class StoryStore:
    """Stories in `folder/stories.sqlite3`; the folder is made when missing.

    Opening raises `StorageUnwritable` (the folder or the file is not writable),
    `NotLoomDatabase` (a foreign or damaged file, left untouched), `NewerDatabase` or
    `DatabaseLocked`. An instance holds no connection: share it between threads.
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
        if self._needs_schema():
            self._initialise()
        self._prepare()

    # -- stories ----------------------------------------------------------------------
    def create(
        self,
        text: str = "",
        *,
        token_ids: Sequence[int] | None = None,
        model: str | None = None,
        title: str | None = None,
        kind: str = "create",
    ) -> str:
        """A new story whose first state is `text`; returns its id."""
        _check_kind(kind, FIRST_KINDS)
        if title is not None:
            _check_str(title, "the title")
        row = _state_row(0, kind, None, time.time(), text, token_ids, model)
        story_id = uuid.uuid4().hex[:12]
        with self._write(story_id) as db:
            db.execute(
                "INSERT INTO stories (id, title, created, updated) VALUES (?, ?, ?, ?)",
                (story_id, _title_value(title), row.created, row.created),
            )
            _insert(db, story_id, row)
        return story_id

    def get(self, story_id: str) -> StoryState:
        """The current state. Raises `StoryNotFound`."""
        with self._read(story_id) as db:
            return _head(db, story_id)[0]

    def info(self, story_id: str) -> StoryInfo:
        with self._read(story_id) as db:
            return _infos(db, story_id=story_id)[0]

    def list_stories(self, *, include_deleted: bool = False) -> list[StoryInfo]:
        """Saved stories, last edited first."""
        with self._read() as db:
            infos = _infos(db)
        return [i for i in infos if include_deleted or not i.deleted]

    def rename(self, story_id: str, title: str) -> None:
        """Set the title; a blank one goes back to the story's first words."""
        value = _title_value(_check_str(title, "the title"))
        with self._write(story_id) as db:
            _story(db, story_id)
            db.execute(
                "UPDATE stories SET title = ?, updated = ? WHERE id = ?",
                (value, time.time(), story_id),
            )

    def delete(self, story_id: str) -> None:
        """Mark a story deleted (kept, and restorable, until purged)."""
        with self._write(story_id) as db:
            _story(db, story_id)
            db.execute(
                "UPDATE stories SET deleted = ? WHERE id = ? AND deleted IS NULL",
                (time.time(), story_id),
            )

    def restore(self, story_id: str) -> None:
        with self._write(story_id) as db:
            _story(db, story_id)
            db.execute("UPDATE stories SET deleted = NULL WHERE id = ?", (story_id,))

    def purge(self, story_id: str) -> None:
        """Remove a deleted story and its whole history for real. Raises `NotDeleted`."""
        with self._write(story_id) as db:
            if _story(db, story_id)["deleted"] is None:
                raise NotDeleted(f"only a deleted story can be purged; delete {story_id} first")
            db.execute("PRAGMA secure_delete = ON")
            db.execute("DELETE FROM log WHERE story_id = ?", (story_id,))
            db.execute("DELETE FROM stories WHERE id = ?", (story_id,))
        # The WAL still holds the old pages until a checkpoint. A reader holding them only
        # delays it, so this is best effort, and its failure is no news to the caller.
        try:
            db = self._connect()
        except StoreError:
            return
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        finally:
            db.close()

    # -- states -------------------------------------------------------------------------
    def save(
        self,
        story_id: str,
        text: str,
        *,
        token_ids: Sequence[int] | None = None,
        model: str | None = None,
        kind: str = "edit",
    ) -> StoryState:
        """Append a state after the current one and return it.

        A save equal to the current state (text, ids and model) writes nothing and
        returns the current state. After an undo, the undone states leave the branch.
        """
        _check_kind(kind, SAVE_KINDS)
        return self._write_state(story_id, text, token_ids, model, kind, dedupe=True)

    def undo(self, story_id: str) -> StoryState | None:
        """Go back to the state before the current one; None when there is none."""
        with self._write(story_id) as db:
            state, row = _head(db, story_id)
            if row.parent is None:
                return None
            return _append_move(db, story_id, state.version + 1, "undo", row.parent)

    def redo(self, story_id: str) -> StoryState | None:
        """Go forward again along the branch; None when there is nothing to redo."""
        with self._write(story_id) as db:
            state, row = _head(db, story_id)
            target = _redo_target(db, story_id, row.seq)
            if target is None:
                return None
            return _append_move(db, story_id, state.version + 1, "redo", target)

    def can_undo(self, story_id: str) -> bool:
        with self._read(story_id) as db:
            return _head(db, story_id)[1].parent is not None

    def can_redo(self, story_id: str) -> bool:
        with self._read(story_id) as db:
            return _redo_target(db, story_id, _head(db, story_id)[1].seq) is not None

    def history(self, story_id: str) -> list[StoryState]:
        """Every version, oldest first: the state current after each log row."""
        with self._read(story_id) as db:
            _story(db, story_id)
            rows = _rows(db, story_id)
        states = {r.seq: r for r in rows if r.text is not None}
        return [_state(story_id, r, states[r.state]) for r in rows]

    def timeline(self, story_id: str) -> Timeline:
        """The branch undo and redo walk, and where the story stands on it."""
        with self._read(story_id) as db:
            return _timeline(db, story_id)

    # -- what goes with a story ---------------------------------------------------------
    def save_settings(self, story_id: str, settings: Mapping[str, Any]) -> None:
        """Replace the story's search settings (a JSON-able mapping)."""
        if not isinstance(settings, Mapping):
            raise InvalidInput(f"settings must be a mapping, not {type(settings).__name__}")
        self._set(story_id, "settings", _json(dict(settings), "the settings"))

    def load_settings(self, story_id: str) -> dict:
        """The story's last settings; {} when none were saved."""
        with self._read(story_id) as db:
            return _settings(_story(db, story_id))

    def save_tree(self, story_id: str, tree: Mapping[str, Any] | None) -> None:
        """Replace the story's last search tree (a JSON-able mapping); None forgets it."""
        if tree is not None and not isinstance(tree, Mapping):
            raise InvalidInput(f"a tree must be a mapping, not {type(tree).__name__}")
        self._set(story_id, "tree", None if tree is None else _json(dict(tree), "the tree"))

    def load_tree(self, story_id: str) -> dict | None:
        with self._read(story_id) as db:
            return _tree(_story(db, story_id))

    # -- export and import --------------------------------------------------------------
    def export_text(self, story_id: str) -> str:
        """The current text, exactly (it may hold lone surrogates: encode with care)."""
        return self.get(story_id).text

    def export_markdown(self, story_id: str) -> str:
        """The current text under its title as a heading; the text is left as written."""
        with self._read(story_id) as db:
            title = _infos(db, story_id=story_id)[0].title
            text = _head(db, story_id)[0].text
        heading = " ".join(title.split())
        body = text if text.endswith("\n") else text + "\n"
        return f"# {heading}\n\n{body}" if heading else body

    def export_json(self, story_id: str) -> str:
        """The whole story as JSON: its log, title, settings and tree.

        `import_json` of it, exported again, gives the same JSON but for "id",
        "updated_at" and "exported_at". ASCII only (lone surrogates escaped).
        """
        with self._read(story_id) as db:
            story = _story(db, story_id)
            rows = _rows(db, story_id)
            data = {
                "format": EXPORT_FORMAT,
                "version": EXPORT_VERSION,
                "id": story_id,
                "title": None if story["title"] is None else _text(story["title"]),
                "created_at": story["created"],
                "updated_at": story["updated"],
                "exported_at": time.time(),
                "settings": _settings(story),
                "tree": _tree(story),
                "history": [_row_to_json(r) for r in rows],
            }
        return json.dumps(_escaped(data), ensure_ascii=True, indent=1)

    def import_json(self, data: str | bytes) -> str:
        """A new story from `export_json`'s output; returns its id. Raises `BadImport`.

        The log is copied as it was (kinds, times, branches); the story gets a new id.
        """
        story = _parse_export(data)
        story_id = uuid.uuid4().hex[:12]
        with self._write(story_id) as db:
            db.execute(
                "INSERT INTO stories (id, title, created, updated, settings, tree) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (story_id, story["title"], story["created_at"], time.time(),
                 story["settings"], story["tree"]),
            )  # fmt: skip
            for row in story["rows"]:
                _insert(db, story_id, row)
        return story_id

    # -- writing ------------------------------------------------------------------------
    def _write_state(
        self,
        story_id: str,
        text: str,
        token_ids: Sequence[int] | None,
        model: str | None,
        kind: str,
        *,
        dedupe: bool,
    ) -> StoryState:
        new = _state_row(0, kind, None, time.time(), text, token_ids, model)
        with self._write(story_id) as db:
            current, row = _head(db, story_id)
            same = (new.text, new.token_ids, new.model) == (row.text, row.token_ids, row.model)
            if dedupe and same:
                return current
            seq = current.version + 1
            new = replace(new, seq=seq, state=seq, parent=row.seq)
            _insert(db, story_id, new)
            return _state(story_id, new, new)

    def _move_to(self, story_id: str, position: int) -> None:
        """Make state `position` of the timeline current (one undo or redo row)."""
        with self._write(story_id) as db:
            timeline = _timeline(db, story_id)
            if type(position) is not int or not 0 <= position < len(timeline.states):
                raise InvalidInput(f"story {story_id} has no state {position}")
            if position != timeline.position:
                kind = "undo" if position < timeline.position else "redo"
                version = _head(db, story_id)[0].version + 1
                _append_move(db, story_id, version, kind, timeline.states[position].version)

    def _set(self, story_id: str, column: str, value: str | None) -> None:
        with self._write(story_id) as db:
            _story(db, story_id)
            db.execute(f"UPDATE stories SET {column} = ? WHERE id = ?", (value, story_id))

    # -- opening ------------------------------------------------------------------------
    def _needs_schema(self) -> bool:
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
        if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
            raise self._foreign()
        app_id = int.from_bytes(head[68:72], "big")
        schema_cookie = int.from_bytes(head[40:44], "big")
        if app_id == APPLICATION_ID:
            return False
        if app_id == 0 and schema_cookie == 0:  # an empty SQLite file: checked again below
            return True
        raise self._foreign()

    def _initialise(self) -> None:
        """Write the schema into a new or empty file (another process may be first)."""
        db = self._connect(create=True)
        try:
            db.execute("BEGIN IMMEDIATE")
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
            if app_id != 0 or tables:
                db.execute("ROLLBACK")
                if app_id != APPLICATION_ID:
                    raise self._foreign()
                return
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            for statement in SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except sqlite3.Error as e:
            raise self._error(e) from e
        finally:
            db.close()

    def _prepare(self) -> None:
        """Check our file, migrate it, switch it to WAL and make sure it is writable."""
        db = self._connect()
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise NewerDatabase(
                    f"the database at {self.path} was written by a newer LLooM (schema "
                    f"{version}, this one reads {SCHEMA_VERSION}); it was left untouched; "
                    "upgrade LLooM to open it"
                )
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise self._foreign()
            if version < SCHEMA_VERSION:
                self._migrate(db, version)
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            if not {"stories", "log"} <= tables:
                raise self._foreign()
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN IMMEDIATE")  # a read-only file or folder fails here, not later
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("ROLLBACK")
        except sqlite3.Error as e:
            raise self._error(e) from e
        except _Unreadable as e:  # a migration met a value it cannot read
            raise self._foreign() from e
        finally:
            db.close()

    def _migrate(self, db: sqlite3.Connection, version: int) -> None:
        """Run `MIGRATIONS` from `version` up in one transaction, after a backup copy."""
        if version not in MIGRATIONS:
            raise self._foreign()
        copy = sqlite3.connect(self.folder / f"{FILE_NAME}.v{version}-backup")
        try:
            db.backup(copy)
        finally:
            copy.close()
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]  # another process?
            while version < SCHEMA_VERSION:
                MIGRATIONS[version](db)
                version += 1
            db.execute(f"PRAGMA user_version = {version}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- connections --------------------------------------------------------------------
    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        uri = f"{self.path.as_uri()}?mode={'rwc' if create else 'rw'}"
        try:
            db = sqlite3.connect(uri, uri=True, timeout=BUSY_MS / 1000, isolation_level=None)
        except sqlite3.Error as e:
            raise self._error(e) from e
        db.row_factory = sqlite3.Row
        try:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_MS)}")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as e:
            db.close()
            raise self._error(e) from e
        return db

    @contextmanager
    def _transaction(self, begin: str, story_id: str | None) -> Iterator[sqlite3.Connection]:
        db = self._connect()
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
            raise self._error(e) from e
        except _Unreadable as e:
            raise DamagedStory(
                f"story {story_id} cannot be read: {e}; the database at {self.path} may be "
                "damaged: export what you can and keep a copy of the file"
            ) from e
        finally:
            db.close()

    def _read(self, story_id: str | None = None) -> AbstractContextManager[sqlite3.Connection]:
        """One snapshot for several reads."""
        return self._transaction("BEGIN", _check_id(story_id))

    def _write(self, story_id: str | None = None) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction; the write lock is taken at once, so it cannot deadlock."""
        return self._transaction("BEGIN IMMEDIATE", _check_id(story_id))

    def _foreign(self) -> NotLoomDatabase:
        return NotLoomDatabase(
            f"the database at {self.path} is not a LLooM database or is damaged; it was "
            "left untouched; move it aside (or choose another data folder) and start again"
        )

    def _error(self, e: sqlite3.Error) -> StoreError:
        name, text = getattr(e, "sqlite_errorname", "") or "", str(e)
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            return DatabaseLocked(
                f"the database at {self.path} stayed locked by another program for "
                f"{BUSY_MS} ms, so this change was not saved (nothing saved before is lost); "
                "close other programs using it and try again"
            )
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
            return self._foreign()
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


# -- the Book the page's workspace uses -----------------------------------------------------
class Store:
    """`StoryStore` as the `weave.session.Book` that `Workspace` saves into.

    A book records every change it is given, even one equal to the current state, so that
    its positions stay those of the workspace's history; "start" is the store's "create".
    """

    def __init__(self, folder: str | os.PathLike[str]):
        self.store = StoryStore(folder)
        self.path = self.store.path
        self.location = str(self.store.folder)

    def create(self, text: str, *, kind: str = "start", title: str | None = None) -> str:
        return self.store.create(text, title=title, kind="import" if kind == "import" else "create")

    def record(self, story_id: str, text: str, kind: str) -> None:
        kind = kind if kind in SAVE_KINDS else "edit"
        self.store._write_state(story_id, text, None, None, kind, dedupe=False)

    def move(self, story_id: str, position: int) -> None:
        self.store._move_to(story_id, position)

    def load(self, story_id: str) -> Saved | None:
        try:
            with self.store._read(story_id) as db:
                story = _story(db, story_id)
                title = _infos(db, story_id=story_id)[0].title
                timeline = _timeline(db, story_id)
                settings, tree = _settings(story), _tree(story)
        except StoryNotFound:
            return None
        history = tuple(
            Change(s.text, "start" if s.kind == "create" else s.kind, s.token_ids)
            for s in timeline.states
        )
        return Saved(story_id, title, history, timeline.position, settings, tree)

    def stories(self, *, deleted: bool = False) -> list[Entry]:
        infos = self.store.list_stories(include_deleted=True)
        return [
            Entry(i.id, i.title, i.updated_at, i.deleted) for i in infos if i.deleted == deleted
        ]

    def rename(self, story_id: str, title: str) -> None:
        self.store.rename(story_id, title)

    def delete(self, story_id: str) -> None:
        self.store.delete(story_id)

    def restore(self, story_id: str) -> None:
        self.store.restore(story_id)

    def purge(self, story_id: str) -> None:
        self.store.purge(story_id)

    def save_settings(self, story_id: str, settings: dict) -> None:
        self.store.save_settings(story_id, settings)

    def save_search(self, story_id: str, search: dict) -> None:
        self.store.save_tree(story_id, search)


# -- queries (inside a transaction) ---------------------------------------------------------
_ROW_COLUMNS = "seq, kind, state, parent, created, model, token_ids, text"


def _story(db: sqlite3.Connection, story_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM stories WHERE id = ?", (story_id,)).fetchone()
    if row is None:
        raise StoryNotFound(f"no story {story_id} in the store (purged, or never saved here)")
    return row


def _head(db: sqlite3.Connection, story_id: str) -> tuple[StoryState, _Row]:
    """The current state, and the row that wrote it."""
    last = db.execute(
        "SELECT seq, kind, state, created FROM log WHERE story_id = ? ORDER BY seq DESC LIMIT 1",
        (story_id,),
    ).fetchone()
    if last is None:
        _story(db, story_id)
        raise _Unreadable("it has no history")
    row = _select_row(db, story_id, last["state"])
    move = _Row(last["seq"], last["kind"], last["state"], None, last["created"])
    return _state(story_id, move, row), row


def _select_row(db: sqlite3.Connection, story_id: str, seq: int) -> _Row:
    found = db.execute(
        f"SELECT {_ROW_COLUMNS} FROM log WHERE story_id = ? AND seq = ?", (story_id, seq)
    ).fetchone()
    if found is None or found["text"] is None:
        raise _Unreadable(f"its state {seq} is missing")
    return _row(found)


def _rows(db: sqlite3.Connection, story_id: str) -> list[_Row]:
    query = f"SELECT {_ROW_COLUMNS} FROM log WHERE story_id = ? ORDER BY seq"
    return [_row(r) for r in db.execute(query, (story_id,))]


def _branch(db: sqlite3.Connection, story_id: str) -> list[int]:
    """The written states from the first to the newest, following parents back."""
    parents = dict(
        db.execute("SELECT seq, parent FROM log WHERE story_id = ? AND state = seq", (story_id,))
    )
    branch, seq = [], max(parents)
    while seq is not None:
        branch.append(seq)
        seq = parents[seq]
    return branch[::-1]


def _redo_target(db: sqlite3.Connection, story_id: str, current: int) -> int | None:
    branch = _branch(db, story_id)
    at = branch.index(current)
    return branch[at + 1] if at + 1 < len(branch) else None


def _timeline(db: sqlite3.Connection, story_id: str) -> Timeline:
    current = _head(db, story_id)[1].seq
    branch = _branch(db, story_id)
    states: list[StoryState] = []
    for start in range(0, len(branch), 500):  # under SQLite's limit on parameters
        chunk = branch[start : start + 500]
        rows = db.execute(
            f"SELECT {_ROW_COLUMNS} FROM log WHERE story_id = ? "
            f"AND seq IN ({','.join('?' * len(chunk))}) ORDER BY seq",
            (story_id, *chunk),
        )
        states += (_state(story_id, r, r) for r in map(_row, rows))
    return Timeline(tuple(states), branch.index(current))


def _infos(db: sqlite3.Connection, *, story_id: str | None = None) -> list[StoryInfo]:
    where = "WHERE s.id = ?" if story_id is not None else ""
    rows = db.execute(
        f"""SELECT s.id, s.title, s.created, s.updated, s.deleted,
            (SELECT COUNT(*) FROM log WHERE story_id = s.id) AS versions,
            (SELECT substr(text, 1, {TITLE_BYTES}) FROM log WHERE story_id = s.id
                AND state = seq AND length(text) > 0 ORDER BY seq LIMIT 1) AS opening
        FROM stories s {where} ORDER BY s.updated DESC, s.created DESC, s.id""",
        () if story_id is None else (story_id,),
    ).fetchall()
    if story_id is not None and not rows:
        _story(db, story_id)
    return [
        StoryInfo(
            id=r["id"],
            title=_title(r),
            updated_at=r["updated"],
            deleted=r["deleted"] is not None,
            history_len=r["versions"],
            created_at=r["created"],
        )
        for r in rows
    ]


def _title(story: sqlite3.Row) -> str:
    """A listed story's title; one that cannot be read does not hide the others."""
    try:
        if story["title"] is not None:
            return _text(story["title"])
        return _opening_title(story["opening"])
    except _Unreadable:
        return "(a title that cannot be read)"


def _append_move(
    db: sqlite3.Connection, story_id: str, seq: int, kind: str, target: int
) -> StoryState:
    move = _Row(seq, kind, target, None, time.time())
    _insert(db, story_id, move)
    return _state(story_id, move, _select_row(db, story_id, target))


def _insert(db: sqlite3.Connection, story_id: str, row: _Row) -> None:
    """Append a log row; the story counts as edited now."""
    ids = None if row.token_ids is None else json.dumps(list(row.token_ids))
    db.execute(
        f"INSERT INTO log (story_id, {_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (story_id, row.seq, row.kind, row.state, row.parent, row.created,
         _blob(row.model), ids, _blob(row.text)),
    )  # fmt: skip
    db.execute("UPDATE stories SET updated = ? WHERE id = ?", (time.time(), story_id))


def _settings(story: sqlite3.Row) -> dict:
    if story["settings"] is None:
        return {}
    value = _load_json(story["settings"], "its settings are")
    if not isinstance(value, dict):
        raise _Unreadable("its settings are not a JSON object")
    return value


def _tree(story: sqlite3.Row) -> dict | None:
    return None if story["tree"] is None else _load_json(story["tree"], "its last tree is")


# -- values in and out ------------------------------------------------------------------------
def _check_id(story_id: str | None) -> str | None:
    if story_id is not None and not isinstance(story_id, str):
        raise InvalidInput(f"a story id is a str, not {type(story_id).__name__}")
    return story_id


def _check_kind(kind: str, allowed: tuple[str, ...]) -> None:
    if kind not in allowed:
        raise InvalidInput(f"kind must be one of {', '.join(allowed)}, not {kind!r}")


def _check_str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a str, not {type(value).__name__}")
    return value


def _check_ids(token_ids: object) -> tuple[int, ...] | None:
    if token_ids is None:
        return None
    if isinstance(token_ids, str | bytes) or not isinstance(token_ids, Sequence):
        raise InvalidInput(f"token ids must be a list of ints, not {type(token_ids).__name__}")
    ids = tuple(token_ids)
    if not all(type(i) is int and i >= 0 for i in ids):
        raise InvalidInput("token ids must be non-negative ints")
    return ids


def _state_row(
    seq: int, kind: str, parent: int | None, created: float,
    text: object, token_ids: object, model: object,
) -> _Row:  # fmt: skip
    """A checked state row."""
    text = _check_str(text, "the text")
    model = None if model is None else _check_str(model, "the model")
    return _Row(seq, kind, seq, parent, created, text, _check_ids(token_ids), model)


def _title_value(title: str | None) -> bytes | None:
    return None if title is None or not title.strip() else _blob(title)


def _json(value: Any, what: str) -> bytes:
    """JSON as UTF-8 bytes; unescaped, so that surrogates stay exactly as they are."""
    try:
        return _blob(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{what} cannot be saved as JSON: {e}") from e


def _load_json(data: str | bytes, what: str) -> Any:
    try:
        return json.loads(
            data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
        )
    except (ValueError, UnicodeDecodeError) as e:
        raise _Unreadable(f"{what} not valid JSON ({e})") from e


def _escaped(value: Any) -> Any:
    """`value` with every str that ASCII JSON would not give back exactly escaped."""
    if isinstance(value, str):
        if value.startswith(_ESCAPED) or _PAIR.search(value):
            return _ESCAPED + base64.b64encode(_blob(value)).decode("ascii")
        return value
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    return value


def _unescaped(value: Any) -> Any:
    """`_escaped`'s inverse; raises ValueError for a damaged escape."""
    if isinstance(value, str):
        if not value.startswith(_ESCAPED):
            return value
        try:
            data = base64.b64decode(value[len(_ESCAPED) :], validate=True)
            return data.decode("utf-8", "surrogatepass")
        except (binascii.Error, UnicodeDecodeError) as e:
            raise ValueError(f"a damaged escaped string ({e})") from e
    if isinstance(value, dict):
        return {_unescaped(k): _unescaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unescaped(v) for v in value]
    return value


def _blob(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogatepass")


def _text(data: bytes | str) -> str:
    if isinstance(data, str):  # written by hand or by another tool: take it as it is
        return data
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as e:
        raise _Unreadable(f"a text is not UTF-8 ({e})") from e


def _opening_title(data: bytes | None) -> str:
    """The title made of a text's first bytes, which may end inside a character."""
    if data is None:
        return ""
    for end in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return title_for(data[:end].decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            continue
    raise _Unreadable("its first text is not UTF-8")


def _row(r: sqlite3.Row) -> _Row:
    ids = None
    if r["token_ids"] is not None:
        ids = _load_json(r["token_ids"], "its token ids are")
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise _Unreadable("its token ids are not a list of ints")
        ids = tuple(ids)
    return _Row(
        seq=r["seq"], kind=r["kind"], state=r["state"], parent=r["parent"], created=r["created"],
        text=None if r["text"] is None else _text(r["text"]), token_ids=ids,
        model=None if r["model"] is None else _text(r["model"]),
    )  # fmt: skip


def _state(story_id: str, version: _Row, state: _Row) -> StoryState:
    """The state that row `state` wrote, as current after row `version`."""
    assert state.text is not None, "a state row carries its text"
    return StoryState(
        story_id, version.seq, state.text, state.token_ids, state.model, version.kind,
        version.created,
    )  # fmt: skip


# -- the export format ----------------------------------------------------------------------
def _row_to_json(row: _Row) -> dict:
    if row.text is None:
        return {"version": row.seq, "kind": row.kind, "created_at": row.created, "state": row.state}
    return {
        "version": row.seq, "kind": row.kind, "created_at": row.created, "parent": row.parent,
        "text": row.text, "token_ids": None if row.token_ids is None else list(row.token_ids),
        "model": row.model,
    }  # fmt: skip


def _parse_export(data: str | bytes) -> dict:
    """Checked values for a new story from `export_json`'s output."""
    try:
        doc = _unescaped(json.loads(data))
    except (ValueError, UnicodeDecodeError, TypeError) as e:
        raise BadImport(f"not a LLooM story export: it is not JSON ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
        raise BadImport(f'not a LLooM story export (no "format": "{EXPORT_FORMAT}")')
    if doc.get("version") != EXPORT_VERSION:
        raise BadImport(
            f"a LLooM story export of version {doc.get('version')!r}; this LLooM reads "
            f"version {EXPORT_VERSION}"
        )
    history = doc.get("history")
    if not isinstance(history, list) or not history:
        raise BadImport("the story export has no history")
    try:
        rows = [_row_from_json(i, item) for i, item in enumerate(history)]
        _check_log(rows)
        title = doc.get("title")
        if title is not None:
            _check_str(title, "the title")
        settings, tree = doc.get("settings") or {}, doc.get("tree")
        if not isinstance(settings, dict) or not (tree is None or isinstance(tree, dict)):
            raise ValueError("its settings must be an object, its tree an object or null")
        return {
            "title": _title_value(title), "rows": rows,
            "created_at": _number(doc.get("created_at", rows[0].created), "its created_at"),
            "settings": _json(settings, "the settings"),
            "tree": None if tree is None else _json(tree, "the tree"),
        }  # fmt: skip
    except (ValueError, TypeError) as e:
        raise BadImport(f"the story export cannot be imported: {e}") from e


def _row_from_json(index: int, item: object) -> _Row:
    if not isinstance(item, dict) or item.get("version") != index:
        raise ValueError(f"history entry {index} is not an object with version {index}")
    kind, created = item.get("kind"), _number(item.get("created_at"), f"entry {index}'s time")
    if kind in MOVE_KINDS:
        state = item.get("state")
        if type(state) is not int:
            raise ValueError(f"history entry {index} ({kind}) names no state")
        return _Row(index, kind, state, None, created)
    if kind not in FIRST_KINDS + SAVE_KINDS:
        raise ValueError(f"history entry {index} has an unknown kind {kind!r}")
    parent = item.get("parent")
    if parent is not None and type(parent) is not int:
        raise ValueError(f"history entry {index} has a parent that is not a version")
    return _state_row(
        index, kind, parent, created, item.get("text"), item.get("token_ids"), item.get("model")
    )


def _number(value: object, what: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ValueError(f"{what} is not a time in seconds")
    return float(value)


def _check_log(rows: list[_Row]) -> None:
    """Replay a log as `save`, `undo` and `redo` write it; raises ValueError where not.

    The model is the editor's: a list of states (the branch) and a position in it.
    """
    branch: list[int] = []
    at = -1
    for row in rows:
        if row.kind in MOVE_KINDS:
            to = branch.index(row.state) if row.state in branch else None
            if to is None or to == at or (to < at) != (row.kind == "undo"):
                raise ValueError(
                    f"history entry {row.seq} ({row.kind} to {row.state}) does not move "
                    f"{'back' if row.kind == 'undo' else 'forward'} along the story"
                )
            at = to
            continue
        if row.kind not in (FIRST_KINDS if row.seq == 0 else SAVE_KINDS):
            raise ValueError(f"history entry {row.seq} cannot be of kind {row.kind!r}")
        if row.parent != (branch[at] if branch else None):
            raise ValueError(f"history entry {row.seq} was not made from the state before it")
        del branch[at + 1 :]
        branch.append(row.seq)
        at = len(branch) - 1


# -- migrations -------------------------------------------------------------------------------
def _migrate_1_to_2(db: sqlite3.Connection) -> None:
    """Schema 1 kept a mutable current pointer, a title always, and no token ids.

    Its changes become log rows ("start" is "create"); a story not at its tip gets one
    "undo" row; a title equal to its first words becomes a derived one again.
    """
    db.execute("ALTER TABLE stories RENAME TO stories_v1")
    for statement in SCHEMA:
        db.execute(statement)
    for old in db.execute("SELECT * FROM stories_v1").fetchall():
        changes = db.execute(
            "SELECT seq, parent, text, kind, created FROM changes WHERE story_id = ? ORDER BY seq",
            (old["id"],),
        ).fetchall()
        if not changes:
            continue
        title = _text(old["title"])
        db.execute(
            "INSERT INTO stories (id, title, created, updated, deleted, settings, tree) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (old["id"], None if title == title_for(_text(changes[0]["text"])) else _blob(title),
             old["created"], old["updated"], old["updated"] if old["deleted"] else None,
             old["settings"], old["search"]),
        )  # fmt: skip
        for c in changes:
            kinds = FIRST_KINDS if c["seq"] == 0 else SAVE_KINDS
            kind = c["kind"] if c["kind"] in kinds else kinds[0]
            _insert(db, old["id"], _Row(c["seq"], kind, c["seq"], c["parent"], c["created"],
                                        _text(c["text"])))  # fmt: skip
        if old["current"] != old["tip"]:
            undo = _Row(changes[-1]["seq"] + 1, "undo", old["current"], None, old["updated"])
            _insert(db, old["id"], undo)
        db.execute("UPDATE stories SET updated = ? WHERE id = ?", (old["updated"], old["id"]))
    db.execute("DROP TABLE changes")
    db.execute("DROP TABLE stories_v1")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_1_to_2}
