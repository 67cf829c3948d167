"""Every story's loom in SQLite: `<data folder>/stories.sqlite3`, and the store's API.

Nodes are rows that are only ever added (triggers refuse to change one, or to delete one
of a story that is not deleted); the cursor, each parent's checked-out child, bookmarks,
settings and the suggestions shown at a node are small records beside them. The tree is
written through one method, `LoomStore.update(story_id, move)`: in one `BEGIN IMMEDIATE`
transaction it reads the loom as stored (with the nodes other tabs and processes added),
applies a pure move from `weave.loom`, and writes what the move added. So two writers
on one story only ever add nodes, and nothing saved is lost when a process is killed.

A store is one writer's view of the file (`writer`; `as_writer` gives another's): it
lists, opens, changes, exports and imports only that writer's stories, and another
writer's story is `StoryNotFound` to it. The filter is `weave.store_rows`' alone, so no
caller can forget it. Stories made without a login are `LOCAL_WRITER`'s; `give` hands
one to another writer.

The file: WAL, `synchronous=FULL`, a busy timeout, one connection per operation (share a
store between threads and processes). It is opened only when its header says it is ours
(SQLite with our application id); a foreign or damaged file is left untouched, a newer
one refused, and one written by the store before the loom (schema 2: a log of states and
undo/redo rows) is migrated in one transaction after a backup copy beside it, each
story's log replayed into a loom (`weave.loom_formats.loom_from_log`). Every failure is
a `StoreError` subclass whose message says what to check. Values are written as strict
JSON: NaN or an infinity is refused, and suggestions or settings holding one that come in
(an import, a migrated search) are left out.

This module owns the store's API, `LoomStore`, and is where its names are imported from.
It leaves the pieces to others: the errors to `weave.store_errors`, the tables to
`weave.store_schema`, opening the file and its connections to `weave.store_file`, the
migration to `weave.store_migration`, a story's rows to `weave.store_rows`; the tree's
moves are `weave.loom`'s, the JSON documents `weave.loom_formats`'. None of them imports
anything from the page, the session layer or the backends.
"""

from __future__ import annotations

import copy
import os
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from weave.loom import Loom
from weave.loom_formats import SavedStory, finite_only, loom_document, read_document
from weave.store_errors import (
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
from weave.store_file import StoreFile
from weave.store_rows import (
    TITLE_BYTES,
    StoryInfo,
    checked,
    dumps,
    insert_story,
    loads,
    read_loom,
    save_changes,
    story_infos,
    story_row,
    title_value,
)
from weave.store_schema import APPLICATION_ID, FILE_NAME, LOCAL_WRITER, SCHEMA, SCHEMA_VERSION

__all__ = [
    "APPLICATION_ID",
    "FILE_NAME",
    "LOCAL_WRITER",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TITLE_BYTES",
    "BadImport",
    "DamagedStory",
    "DatabaseLocked",
    "InvalidInput",
    "LoomStore",
    "NewerDatabase",
    "NotDeleted",
    "NotLoomDatabase",
    "StorageFailed",
    "StorageUnwritable",
    "StoreError",
    "StoryInfo",
    "StoryNotFound",
]


class LoomStore:
    """`writer`'s stories in `folder/stories.sqlite3`; the folder and file are made when
    missing.

    Opening raises `StorageUnwritable`, `NotLoomDatabase` (a foreign or damaged file,
    left untouched), `NewerDatabase` or `DatabaseLocked`. Holds no connection.
    """

    def __init__(
        self, folder: str | os.PathLike[str], *, busy_ms: int = 5000, writer: str = LOCAL_WRITER
    ):
        self.folder = Path(folder).expanduser().absolute()
        self.path = self.folder / FILE_NAME
        self.busy_ms = busy_ms
        self.writer = writer
        self._file = StoreFile(self.path, busy_ms, writer)
        self._file.prepare()

    def as_writer(self, writer: str) -> LoomStore:
        """This store's file as `writer` sees it (opened already: not checked again)."""
        store = copy.copy(self)
        store.writer, store._file = writer, replace(self._file, writer=writer)
        return store

    # -- stories ------------------------------------------------------------------------
    def create(
        self, text: str = "", *, title: str | None = None, kind: str = "typed", **node: Any
    ) -> tuple[str, Loom]:
        """A new story holding `text` (`node`: token_ids, model...); its id and its loom."""
        loom = Loom.new(checked(text), kind=kind, **node)
        story_id = uuid.uuid4().hex[:12]
        with self._file.write() as db:
            insert_story(db, story_id, SavedStory(loom, title_value(title), time.time()))
        return story_id, loom

    def stories(self, *, deleted: bool = False) -> list[StoryInfo]:
        """The stories (or the deleted ones), last updated first."""
        with self._file.read() as db:
            return [i for i in story_infos(db) if i.deleted == deleted]

    def info(self, story_id: str) -> StoryInfo:
        with self._file.read() as db:
            story_row(db, story_id)
            return story_infos(db, story_id)[0]

    def load(self, story_id: str) -> Loom:
        """The story's loom as stored now: every node, the stored cursor. Raises `StoryNotFound`."""
        with self._file.read() as db:
            return read_loom(db, story_id)

    def update(self, story_id: str, move: Callable[[Loom], Loom]) -> Loom:
        """Apply `move` to the loom as stored now, save what it added, and return it.

        Raises `InvalidInput` when the result removes or changes a node; errors raised by
        `move` itself (`weave.loom.NoSuchNode`) come through, and nothing is written.
        """
        with self._file.write() as db:
            old = read_loom(db, story_id)
            new = move(old)
            save_changes(db, story_id, old, new)
        return new

    def rename(self, story_id: str, title: str) -> None:
        """Set the title; a blank one goes back to the story's first words."""
        self._set(story_id, "title", title_value(checked(title)), edit=True)

    def delete(self, story_id: str) -> None:
        """Mark a story deleted (kept, and restorable, until purged)."""
        with self._file.write() as db:
            story_row(db, story_id)
            db.execute(
                "UPDATE stories SET deleted = ? WHERE id = ? AND deleted IS NULL",
                (time.time(), story_id),
            )

    def give(self, story_id: str, writer: str) -> None:
        """Hand one of this writer's stories to `writer`: it leaves this writer's list."""
        if not isinstance(writer, str) or not writer.strip():
            raise InvalidInput("a story can only be given to a writer named by a login")
        self._set(story_id, "owner", writer)

    def restore(self, story_id: str) -> None:
        self._set(story_id, "deleted", None)

    def purge(self, story_id: str) -> None:
        """Remove a deleted story and all its nodes for real. Raises `NotDeleted`."""
        with self._file.write() as db:
            if story_row(db, story_id)["deleted"] is None:
                raise NotDeleted(f"only a deleted story can be purged; delete {story_id} first")
            db.execute("PRAGMA secure_delete = ON")
            for table in ("suggestions", "bookmarks", "checkouts", "nodes"):
                db.execute(f"DELETE FROM {table} WHERE story_id = ?", (story_id,))
            db.execute("DELETE FROM stories WHERE id = ?", (story_id,))
        # The WAL still holds the old pages until a checkpoint. A reader holding them only
        # delays it, so this is best effort, and its failure is no news to the caller.
        with suppress(StoreError), self._file.connection() as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- what goes with a story ---------------------------------------------------------
    def settings(self, story_id: str) -> dict:
        """The story's search settings; {} when none were saved."""
        with self._file.read() as db:
            value = story_row(db, story_id)["settings"]
        return {} if value is None else loads(value, story_id)

    def save_settings(self, story_id: str, settings: Mapping[str, Any]) -> None:
        self._set(story_id, "settings", dumps(dict(settings), "the settings"))

    def suggestions(self, story_id: str, node_id: str) -> dict | None:
        """The search saved for `node_id`; None when there is none."""
        with self._file.read() as db:
            story_row(db, story_id)
            row = db.execute(
                "SELECT data FROM suggestions WHERE story_id = ? AND node = ?",
                (story_id, node_id),
            ).fetchone()
        return None if row is None else loads(row["data"], story_id)

    def save_suggestions(self, story_id: str, node_id: str, data: Mapping[str, Any] | None) -> None:
        """Replace the search kept for `node_id` (None forgets it)."""
        value = None if data is None else dumps(dict(data), "the suggestions")
        with self._file.write() as db:
            story_row(db, story_id)
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
        with self._file.read() as db:
            row = story_row(db, story_id)
            suggestions = {
                r["node"]: loads(r["data"], story_id)
                for r in db.execute(
                    "SELECT node, data FROM suggestions WHERE story_id = ? ORDER BY node",
                    (story_id,),
                )
            }
            story = SavedStory(
                read_loom(db, story_id), row["title"], row["created"],
                {} if row["settings"] is None else loads(row["settings"], story_id),
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
            checked(node.text)
        story_id = uuid.uuid4().hex[:12]
        with self._file.write() as db:
            insert_story(db, story_id, story)
        return story_id

    def _set(self, story_id: str, column: str, value: Any, *, edit: bool = False) -> None:
        with self._file.write() as db:
            story_row(db, story_id)
            db.execute(f"UPDATE stories SET {column} = ? WHERE id = ?", (value, story_id))
            if edit:
                db.execute("UPDATE stories SET updated = ? WHERE id = ?", (time.time(), story_id))
