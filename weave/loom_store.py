"""Every story's loom in SQLite: `<data folder>/stories.sqlite3`.

Nodes are rows that are only ever added (triggers refuse to change one, or to delete one
of a story that is not deleted); the cursor, each parent's checked-out child, bookmarks,
settings and the suggestions shown at a node are small records beside them. The tree is
written through one method, `LoomStore.update(story_id, move)`: in one `BEGIN IMMEDIATE`
transaction it reads the loom as stored (with the nodes other tabs and processes added),
applies a pure move from `weave.loom`, and writes what the move added. So two writers
on one story only ever add nodes, and nothing saved is lost when a process is killed.

The file: WAL, `synchronous=FULL`, a busy timeout, one connection per operation (share a
store between threads and processes). It is opened only when its header says it is ours
(SQLite with our application id); a foreign or damaged file is left untouched, a newer
one refused, and one written by the store before the loom (schema 2: a log of states and
undo/redo rows) is migrated in one transaction after a backup copy beside it, each
story's log replayed into a loom (`weave.loom_formats.loom_from_log`). Every failure is
a `StoreError` subclass whose message says what to check. Values are written as strict
JSON: NaN or an infinity is refused, and suggestions or settings holding one that come in
(an import, a migrated search) are left out.

This module owns the file, its schema and migration, and the store's API. The tree's
moves are `weave.loom`'s, the JSON documents `weave.loom_formats`'; it imports nothing
from the page, the session layer or the backends.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weave.loom import Loom, Node, title_for
from weave.loom_formats import (
    LogRow,
    SavedStory,
    finite_only,
    loom_document,
    loom_from_log,
    read_document,
    without_surrogates,
)

FILE_NAME = "stories.sqlite3"
SCHEMA_VERSION = 3
APPLICATION_ID = 0x4C6F6F6D  # "Loom": marks the file as ours
TITLE_BYTES = 4096  # of the first node's text, read to make a title
_SQLITE_MAGIC = b"SQLite format 3\x00"

SCHEMA = (
    """CREATE TABLE stories (
        id TEXT PRIMARY KEY,
        title TEXT,           -- NULL: the first words of its first node
        created REAL NOT NULL,
        updated REAL NOT NULL,
        deleted REAL,         -- when it was deleted; NULL while it is not
        settings TEXT,        -- JSON object
        root TEXT NOT NULL,
        cursor TEXT NOT NULL
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
        PRIMARY KEY (story_id, id),
        UNIQUE (story_id, seq),
        FOREIGN KEY (story_id, parent) REFERENCES nodes(story_id, id)
    )""",
    """CREATE TABLE checkouts (
        story_id TEXT NOT NULL, parent TEXT NOT NULL, child TEXT NOT NULL,
        PRIMARY KEY (story_id, parent),
        FOREIGN KEY (story_id, child) REFERENCES nodes(story_id, id)
    )""",
    """CREATE TABLE bookmarks (
        story_id TEXT NOT NULL, node TEXT NOT NULL,
        PRIMARY KEY (story_id, node),
        FOREIGN KEY (story_id, node) REFERENCES nodes(story_id, id)
    )""",
    """CREATE TABLE suggestions (
        story_id TEXT NOT NULL, node TEXT NOT NULL,
        data TEXT NOT NULL,       -- JSON: the search shown at this node
        PRIMARY KEY (story_id, node),
        FOREIGN KEY (story_id, node) REFERENCES nodes(story_id, id)
    )""",
    """CREATE TRIGGER nodes_stay BEFORE UPDATE ON nodes
    BEGIN SELECT RAISE(ABORT, 'nodes are never changed'); END""",
    """CREATE TRIGGER nodes_go_with_purge BEFORE DELETE ON nodes
    WHEN (SELECT deleted FROM stories WHERE id = OLD.story_id) IS NULL
    BEGIN SELECT RAISE(ABORT, 'only a deleted story can be purged'); END""",
    """CREATE TRIGGER stories_go_with_purge BEFORE DELETE ON stories
    WHEN OLD.deleted IS NULL
    BEGIN SELECT RAISE(ABORT, 'only a deleted story can be purged'); END""",
)


# -- errors -------------------------------------------------------------------------------
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


class StorageFailed(StoreError):
    """The disk refused a write (full, I/O error); what was saved before is kept."""


class StoryNotFound(StoreError):
    """No story has this id."""


class NotDeleted(StoreError):
    """Purge is for deleted stories only."""


class DamagedStory(StoreError):
    """A story's saved values cannot be read back."""


class InvalidInput(StoreError, ValueError):
    """A value the store cannot keep (a lone surrogate, a move that removes a node...)."""


class BadImport(StoreError, ValueError):
    """The data given to `import_json` is not a file LLooM can read."""


@dataclass(frozen=True)
class StoryInfo:
    """A story as a list shows it."""

    id: str
    title: str
    nodes: int  # the root included
    created: float
    updated: float  # its last change: a node, a move, a bookmark, its title
    deleted: bool


# -- the store ----------------------------------------------------------------------------
class LoomStore:
    """Stories in `folder/stories.sqlite3`; the folder and file are made when missing.

    Opening raises `StorageUnwritable`, `NotLoomDatabase` (a foreign or damaged file,
    left untouched), `NewerDatabase` or `DatabaseLocked`. Holds no connection.
    """

    def __init__(self, folder: str | os.PathLike[str], *, busy_ms: int = 5000):
        self.folder = Path(folder).expanduser().absolute()
        self.path = self.folder / FILE_NAME
        self.busy_ms = busy_ms
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageUnwritable(
                f"cannot create the data folder {self.folder}: {e.strerror}; "
                "check the path and its permissions"
            ) from e
        self._prepare()

    # -- stories ------------------------------------------------------------------------
    def create(
        self, text: str = "", *, title: str | None = None, kind: str = "typed", **node: Any
    ) -> tuple[str, Loom]:
        """A new story holding `text` (`node`: token_ids, model...); its id and its loom."""
        loom = Loom.new(_checked(text), kind=kind, **node)
        story_id = uuid.uuid4().hex[:12]
        with self._write() as db:
            _insert_story(db, story_id, SavedStory(loom, _title_value(title), time.time()))
        return story_id, loom

    def stories(self, *, deleted: bool = False) -> list[StoryInfo]:
        """The stories (or the deleted ones), last updated first."""
        with self._read() as db:
            return [i for i in _infos(db) if i.deleted == deleted]

    def info(self, story_id: str) -> StoryInfo:
        with self._read() as db:
            _story(db, story_id)
            return _infos(db, story_id)[0]

    def load(self, story_id: str) -> Loom:
        """The story's loom as stored now: every node, the stored cursor. Raises `StoryNotFound`."""
        with self._read() as db:
            return _loom(db, story_id)

    def update(self, story_id: str, move: Callable[[Loom], Loom]) -> Loom:
        """Apply `move` to the loom as stored now, save what it added, and return it.

        Raises `InvalidInput` when the result removes or changes a node; errors raised by
        `move` itself (`weave.loom.NoSuchNode`) come through, and nothing is written.
        """
        with self._write() as db:
            old = _loom(db, story_id)
            new = move(old)
            _save_changes(db, story_id, old, new)
        return new

    def rename(self, story_id: str, title: str) -> None:
        """Set the title; a blank one goes back to the story's first words."""
        self._set(story_id, "title", _title_value(_checked(title)), edit=True)

    def delete(self, story_id: str) -> None:
        """Mark a story deleted (kept, and restorable, until purged)."""
        with self._write() as db:
            _story(db, story_id)
            db.execute(
                "UPDATE stories SET deleted = ? WHERE id = ? AND deleted IS NULL",
                (time.time(), story_id),
            )

    def restore(self, story_id: str) -> None:
        self._set(story_id, "deleted", None)

    def purge(self, story_id: str) -> None:
        """Remove a deleted story and all its nodes for real. Raises `NotDeleted`."""
        with self._write() as db:
            if _story(db, story_id)["deleted"] is None:
                raise NotDeleted(f"only a deleted story can be purged; delete {story_id} first")
            db.execute("PRAGMA secure_delete = ON")
            for table in ("suggestions", "bookmarks", "checkouts", "nodes"):
                db.execute(f"DELETE FROM {table} WHERE story_id = ?", (story_id,))
            db.execute("DELETE FROM stories WHERE id = ?", (story_id,))
        # The WAL still holds the old pages until a checkpoint. A reader holding them only
        # delays it, so this is best effort, and its failure is no news to the caller.
        with suppress(StoreError, sqlite3.Error):
            db = self._connect()
            try:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                db.close()

    # -- what goes with a story ---------------------------------------------------------
    def settings(self, story_id: str) -> dict:
        """The story's search settings; {} when none were saved."""
        with self._read() as db:
            value = _story(db, story_id)["settings"]
        return {} if value is None else _loads(value, story_id)

    def save_settings(self, story_id: str, settings: Mapping[str, Any]) -> None:
        self._set(story_id, "settings", _dumps(dict(settings), "the settings"))

    def suggestions(self, story_id: str, node_id: str) -> dict | None:
        """The search saved for `node_id`; None when there is none."""
        with self._read() as db:
            _story(db, story_id)
            row = db.execute(
                "SELECT data FROM suggestions WHERE story_id = ? AND node = ?",
                (story_id, node_id),
            ).fetchone()
        return None if row is None else _loads(row["data"], story_id)

    def save_suggestions(self, story_id: str, node_id: str, data: Mapping[str, Any] | None) -> None:
        """Replace the search kept for `node_id` (None forgets it)."""
        value = None if data is None else _dumps(dict(data), "the suggestions")
        with self._write() as db:
            _story(db, story_id)
            if not db.execute(
                "SELECT 1 FROM nodes WHERE story_id = ? AND id = ?", (story_id, node_id)
            ).fetchone():
                raise InvalidInput(f"story {story_id} has no node {node_id!r}")
            db.execute(
                "DELETE FROM suggestions WHERE story_id = ? AND node = ?", (story_id, node_id)
            )
            if value is not None:
                db.execute(
                    "INSERT INTO suggestions (story_id, node, data) VALUES (?, ?, ?)",
                    (story_id, node_id, value),
                )

    # -- export and import --------------------------------------------------------------
    def export_json(self, story_id: str) -> str:
        """The whole story as "lloom-loom" JSON; `import_json` of it gives it back."""
        with self._read() as db:
            row = _story(db, story_id)
            suggestions = {
                r["node"]: _loads(r["data"], story_id)
                for r in db.execute(
                    "SELECT node, data FROM suggestions WHERE story_id = ? ORDER BY node",
                    (story_id,),
                )
            }
            story = SavedStory(
                _loom(db, story_id), row["title"], row["created"],
                {} if row["settings"] is None else _loads(row["settings"], story_id),
                suggestions,
            )  # fmt: skip
        return loom_document(story_id, finite_only(story), row["updated"])

    def import_json(self, data: str | bytes) -> str:
        """A new story from a "lloom-loom" file (or the older session and story files).

        Returns its id. Raises `BadImport` saying what is wrong with the file.
        """
        try:
            story = read_document(data)
        except ValueError as e:
            raise BadImport(f"the file cannot be imported: {e}") from e
        for node in story.loom.nodes.values():
            _checked(node.text)
        story_id = uuid.uuid4().hex[:12]
        with self._write() as db:
            _insert_story(db, story_id, story)
        return story_id

    # -- the file -----------------------------------------------------------------------
    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        uri = f"{self.path.as_uri()}?mode={'rwc' if create else 'rw'}"
        try:
            db = sqlite3.connect(uri, uri=True, timeout=self.busy_ms / 1000, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_ms)}")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as e:
            raise self._error(e) from e
        return db

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
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
        finally:
            db.close()

    def _read(self):
        """One snapshot for several reads."""
        return self._transaction("BEGIN")

    def _write(self):
        """One write transaction; the write lock is taken at once, so it cannot deadlock."""
        return self._transaction("BEGIN IMMEDIATE")

    def _set(self, story_id: str, column: str, value: Any, *, edit: bool = False) -> None:
        with self._write() as db:
            _story(db, story_id)
            db.execute(f"UPDATE stories SET {column} = ? WHERE id = ?", (value, story_id))
            if edit:
                db.execute("UPDATE stories SET updated = ? WHERE id = ?", (time.time(), story_id))

    def _foreign(self) -> NotLoomDatabase:
        return NotLoomDatabase(
            f"the database at {self.path} is not a LLooM database or is damaged; it was "
            "left untouched; move it aside (or choose another data folder) and start again"
        )

    def _error(self, e: sqlite3.Error) -> StoreError:
        """The `StoreError` that says what to check about `e`."""
        name, text = getattr(e, "sqlite_errorname", "") or "", str(e)
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            return DatabaseLocked(
                f"the database at {self.path} stayed locked by another program for "
                f"{self.busy_ms} ms, so this change was not saved (nothing saved before is "
                "lost); close other programs using it and try again"
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

    # -- opening: is it ours, its schema, its migration ---------------------------------
    def _prepare(self) -> None:
        if self._is_new():
            self._initialise()
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
                try:
                    self._migrate(db, version)
                except ValueError as e:  # a saved value its replay cannot read
                    raise NotLoomDatabase(
                        f"the database at {self.path} cannot be migrated ({e}); it was left "
                        "untouched"
                    ) from e
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN IMMEDIATE")  # a read-only file or folder fails here, not later
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("ROLLBACK")
        except sqlite3.Error as e:
            raise self._error(e) from e
        finally:
            db.close()

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
        if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
            raise self._foreign()
        app_id = int.from_bytes(head[68:72], "big")
        if app_id == APPLICATION_ID:
            return False
        if app_id == 0 and int.from_bytes(head[40:44], "big") == 0:  # an empty SQLite file
            return True
        raise self._foreign()

    def _initialise(self) -> None:
        """Write the schema into a new or empty file (another process may be first)."""
        db = self._connect(create=True)
        try:
            db.execute("BEGIN IMMEDIATE")
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            if app_id != 0 or db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
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

    def _migrate(self, db: sqlite3.Connection, version: int) -> None:
        """Schema 2 to 3 in one transaction, after a backup copy beside the file."""
        if version != 2:
            raise NotLoomDatabase(
                f"the database at {self.path} has schema {version}, from a LLooM too old "
                "for this one to read; it was left untouched"
            )
        # Another process may migrate the file meanwhile: a copy that is no longer of
        # schema 2 is not a backup, and must not replace one.
        backup = self.folder / f"{FILE_NAME}.v{version}-backup"
        partial = backup.with_name(f"{backup.name}.{os.getpid()}-partial")
        copy = sqlite3.connect(partial)
        try:
            db.backup(copy)
            copied = copy.execute("PRAGMA user_version").fetchone()[0]
        finally:
            copy.close()
        if copied != version:
            partial.unlink()
            return
        os.replace(partial, backup)
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] == 2:  # not another process
                _migrate_2_to_3(db)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


# -- reading a story ----------------------------------------------------------------------
def _story(db: sqlite3.Connection, story_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM stories WHERE id = ?", (story_id,)).fetchone()
    if row is None:
        raise StoryNotFound(f"no story {story_id} in the store (purged, or never saved here)")
    return row


def _loom(db: sqlite3.Connection, story_id: str) -> Loom:
    story = _story(db, story_id)
    nodes = {}
    for r in db.execute("SELECT * FROM nodes WHERE story_id = ? ORDER BY seq", (story_id,)):
        ids = None if r["token_ids"] is None else tuple(_loads(r["token_ids"], story_id))
        params = None if r["params"] is None else _loads(r["params"], story_id)
        nodes[r["id"]] = Node(
            r["id"], r["parent"], r["text"], r["kind"], ids, r["model"], params, r["score"],
            r["created"],
        )  # fmt: skip
    checkouts = dict(
        db.execute("SELECT parent, child FROM checkouts WHERE story_id = ?", (story_id,))
    )
    marks = frozenset(
        r[0] for r in db.execute("SELECT node FROM bookmarks WHERE story_id = ?", (story_id,))
    )
    if story["cursor"] not in nodes or story["root"] not in nodes:
        raise DamagedStory(f"story {story_id} cannot be read: its cursor or root is missing")
    return Loom(nodes, story["root"], story["cursor"], checkouts, marks)


def _infos(db: sqlite3.Connection, story_id: str | None = None) -> list[StoryInfo]:
    where = "WHERE s.id = ?" if story_id is not None else ""
    rows = db.execute(
        f"""SELECT s.id, s.title, s.created, s.updated, s.deleted,
            (SELECT COUNT(*) FROM nodes WHERE story_id = s.id) AS nodes,
            (SELECT substr(CAST(text AS BLOB), 1, {TITLE_BYTES}) FROM nodes
                WHERE story_id = s.id AND seq = 1) AS opening
        FROM stories s {where} ORDER BY s.updated DESC, s.created DESC, s.id""",
        () if story_id is None else (story_id,),
    )
    return [
        StoryInfo(
            id=r["id"],
            title=r["title"] if r["title"] is not None else _opening_title(r["opening"]),
            nodes=r["nodes"],
            created=r["created"],
            updated=r["updated"],
            deleted=r["deleted"] is not None,
        )
        for r in rows
    ]


def _opening_title(opening: bytes | None) -> str:
    """The title made of a text's first bytes (which may end inside a character)."""
    return title_for((opening or b"").decode("utf-8", "ignore"))


def _loads(value: str, story_id: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as e:
        raise DamagedStory(
            f"story {story_id} cannot be read: a saved value is not JSON ({e}); the file may "
            "be damaged: export what you can and keep a copy of it"
        ) from e


# -- writing a story ----------------------------------------------------------------------
def _checked(text: str) -> str:
    if not isinstance(text, str):
        raise InvalidInput(f"a text must be a str, not {type(text).__name__}")
    if without_surrogates(text) != text:
        raise InvalidInput("a text holds a lone surrogate (not a character); clean it first")
    return text


def _title_value(title: str | None) -> str | None:
    return None if title is None or not title.strip() else title


def _dumps(value: Any, what: str) -> str:
    try:  # ASCII: a lone surrogate in a value is kept, escaped; NaN and infinities refused
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{what} cannot be saved as JSON: {e}") from e


def _insert_story(db: sqlite3.Connection, story_id: str, story: SavedStory) -> None:
    """A whole story (imported or migrated); suggestions or settings holding NaN or an
    infinity are left out (`finite_only`)."""
    story = finite_only(story)
    loom, now = story.loom, time.time()
    db.execute(
        "INSERT INTO stories (id, title, created, updated, settings, root, cursor) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (story_id, story.title, story.created, now, _dumps(story.settings, "the settings"),
         loom.root, loom.cursor),
    )  # fmt: skip
    _insert_nodes(db, story_id, list(loom.nodes.values()), 0)
    _save_records(db, story_id, Loom({}, loom.root, loom.root), loom)
    for node_id, data in story.suggestions.items():
        db.execute(
            "INSERT INTO suggestions (story_id, node, data) VALUES (?, ?, ?)",
            (story_id, node_id, _dumps(data, "the suggestions")),
        )


def _insert_nodes(db: sqlite3.Connection, story_id: str, nodes: list[Node], seq: int) -> None:
    for node in nodes:
        if node.score is not None and not math.isfinite(node.score):
            raise InvalidInput(f"node {node.id!r} has a score that is not a finite number")
        db.execute(
            "INSERT INTO nodes (story_id, id, seq, parent, kind, token_ids, model, params, "
            "score, created, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (story_id, node.id, seq, node.parent, node.kind,
             None if node.token_ids is None else _dumps(list(node.token_ids), "the token ids"),
             node.model, None if node.params is None else _dumps(node.params, "the params"),
             node.score, node.created, _checked(node.text)),
        )  # fmt: skip
        seq += 1


def _save_changes(db: sqlite3.Connection, story_id: str, old: Loom, new: Loom) -> None:
    """Write what `new` adds to `old`: nodes, cursor, checkouts, bookmarks."""
    if not isinstance(new, Loom) or new.root != old.root:
        raise InvalidInput("a move must return the story's loom")
    if any(new.nodes.get(node_id) != node for node_id, node in old.nodes.items()):
        raise InvalidInput("a move cannot remove or change a node: nodes are only added")
    added = [node for node_id, node in new.nodes.items() if node_id not in old.nodes]
    _insert_nodes(db, story_id, added, len(old.nodes))
    _save_records(db, story_id, old, new)
    db.execute(
        "UPDATE stories SET cursor = ?, updated = ? WHERE id = ?",
        (new.node(new.cursor).id, time.time(), story_id),
    )


def _save_records(db: sqlite3.Connection, story_id: str, old: Loom, new: Loom) -> None:
    for parent, child in new.checkouts.items():
        if old.checkouts.get(parent) != child:
            db.execute(
                "INSERT OR REPLACE INTO checkouts (story_id, parent, child) VALUES (?, ?, ?)",
                (story_id, parent, child),
            )
    for parent in old.checkouts.keys() - new.checkouts.keys():
        db.execute("DELETE FROM checkouts WHERE story_id = ? AND parent = ?", (story_id, parent))
    for node_id in new.bookmarks - old.bookmarks:
        db.execute("INSERT INTO bookmarks (story_id, node) VALUES (?, ?)", (story_id, node_id))
    for node_id in old.bookmarks - new.bookmarks:
        db.execute("DELETE FROM bookmarks WHERE story_id = ? AND node = ?", (story_id, node_id))


# -- the migration from schema 2 ----------------------------------------------------------
def _migrate_2_to_3(db: sqlite3.Connection) -> None:
    """Schema 2 kept a log per story: its states (whole texts) and undo/redo rows.

    Each log is replayed into a loom; the current state becomes the cursor, the last
    search the suggestions of the cursor's node. Lone surrogates (which the page showed as
    U+FFFD) become U+FFFD. Token ids are dropped: the page never wrote them.
    """
    for statement in (
        "DROP TRIGGER log_rows_stay",
        "DROP TRIGGER log_rows_go_with_purge",
        "DROP TRIGGER stories_go_with_purge",
        "ALTER TABLE stories RENAME TO stories_v2",
        "ALTER TABLE log RENAME TO log_v2",
    ):
        db.execute(statement)
    for statement in SCHEMA:
        db.execute(statement)
    for old in db.execute("SELECT * FROM stories_v2 ORDER BY created").fetchall():
        log = db.execute(
            "SELECT kind, created, text, parent, state, seq FROM log_v2 WHERE story_id = ? "
            "ORDER BY seq",
            (old["id"],),
        ).fetchall()
        if not log:
            continue
        rows = [
            LogRow(r["kind"], r["created"], None if r["text"] is None else _old_text(r["text"]),
                   r["parent"], None if r["text"] is not None else r["state"])
            for r in log
        ]  # fmt: skip
        loom = loom_from_log(rows)
        tree = None if old["tree"] is None else json.loads(_old_text(old["tree"]))
        settings = {} if old["settings"] is None else json.loads(_old_text(old["settings"]))
        title = None if old["title"] is None else _old_text(old["title"])
        shown = {loom.cursor: tree} if tree else {}
        story = SavedStory(loom, title, old["created"], settings, shown)
        _insert_story(db, old["id"], story)
        db.execute(
            "UPDATE stories SET updated = ?, deleted = ? WHERE id = ?",
            (old["updated"], old["deleted"], old["id"]),
        )
    db.execute("DROP TABLE log_v2")
    db.execute("DROP TABLE stories_v2")


def _old_text(value: bytes | str) -> str:
    text = value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value
    return without_surrogates(text)
