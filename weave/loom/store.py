"""Every story's loom, kept in SQLite (`<data folder>/stories.sqlite3`, the embedded default)
or in PostgreSQL (`[data] url`, for a group on several page processes): the store's API,
`LoomStore`, the same on both.

Nodes are rows only ever added, the rest small records beside them. The tree is written only by
`update(story_id, move)`: in one transaction it reads the stored loom (other tabs' and
processes' nodes too), holding the story against other writers, applies a pure move from
`weave.loom.loom` and writes what it added; so two writers on one story only add nodes, and
a killed process loses nothing saved.

Every failure is a `StoreError` saying what to check. A store is one writer's view
(`as_writer` gives another's; without a login, `LOCAL_WRITER`'s): another writer's story is
`StoryNotFound` to it, unless its owner shared it with them (`share`: to read, or to
co-write), and each writer keeps their own place in a shared story; `watch` tells how a
story grows, cheaply enough for a page to ask twice a second. The errors are
`weave.loom.store_errors`', the SQL's one connection interface `weave.loom.store_sql`'s,
SQLite's file `weave.loom.store_file`'s and PostgreSQL's server `weave.loom.store_pg`'s, the
rows and the owner filter `weave.loom.store_rows`', the logins `weave.loom.store_writers`',
a saved story's JSON `weave.loom.formats`'. A file is read, checked and written by
`weave.interop.files`, which the store only hands whole stories (`insert`, `saved`): the
store imports nothing of `weave.interop`, `weave.story` or above, nor the page or the
backends.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from weave.loom import store_rows as rows
from weave.loom import store_writers as writers
from weave.loom.find import MAX_FOUND, Found, find
from weave.loom.formats import SavedStory
from weave.loom.loom import Loom, new_id
from weave.loom.store_errors import (
    BadImport,
    InvalidInput,
    NotDeleted,
    SharedAddress,
    StoreError,
    StoryNotFound,
)
from weave.loom.store_file import FILE_NAME, StoreFile
from weave.loom.store_rows import Share, StoryInfo
from weave.loom.store_sql import LOCAL_WRITER, Database, is_database_url

__all__ = [
    "LOCAL_WRITER",
    "BadImport",
    "InvalidInput",
    "LoomStore",
    "Share",
    "SharedAddress",
    "StoreError",
    "StoryInfo",
    "StoryNotFound",
]


class LoomStore:
    """`writer`'s stories in the database `where` names: a `postgresql://` URL, or a folder
    (its `stories.sqlite3`, made when missing). Opening raises `StorageUnwritable`,
    `NotLoomDatabase` (a foreign, damaged or older database, left untouched),
    `NewerDatabase`, `DatabaseLocked`, and for a server `DatabaseUnavailable` or
    `LoginRefused`. A folder's store holds no connection; a server's shares one pool
    per process (`close`)."""

    def __init__(
        self, where: str | os.PathLike[str], *, busy_ms: int = 5000, writer: str = LOCAL_WRITER
    ):
        self.writer = writer
        self._db: Database
        if is_database_url(where):
            from weave.loom.store_pg import StoreServer  # psycopg only where it is chosen

            self.folder = self.path = None
            self._db = StoreServer(str(where), busy_ms, writer)
        else:
            self.folder = Path(where).expanduser().absolute()
            self.path = self.folder / FILE_NAME
            self._db = StoreFile(self.path, busy_ms, writer)
        self._db.prepare()

    @property
    def where(self) -> str:
        """Where the stories are kept, as the page names it (a URL without its password)."""
        return self._db.where

    def as_writer(self, writer: str) -> LoomStore:
        """This store's database as `writer` sees it (opened already: not checked again)."""
        store = copy.copy(self)
        store.writer, store._db = writer, self._db.as_writer(writer)
        return store

    def close(self) -> None:
        """Close the connections this process holds to the database (a server's pool, and
        its writers' views'); a later call opens them again."""
        self._db.close()

    # -- stories ------------------------------------------------------------------------
    def create(
        self, text: str = "", *, title: str | None = None, kind: str = "typed", **node: Any
    ) -> tuple[str, Loom]:
        """A new story holding `text` (`node`: token_ids, model...); its id and its loom."""
        loom = Loom.new(rows.checked(text), kind=kind, **node)
        title = title if title and title.strip() else None  # None: its first words
        return self.insert(SavedStory(loom, title, time.time())), loom

    def stories(self, *, deleted: bool = False) -> list[StoryInfo]:
        """The stories (or the deleted ones), last updated first."""
        with self._db.read() as db:
            return [i for i in rows.story_infos(db) if i.deleted == deleted]

    def info(self, story_id: str) -> StoryInfo:
        with self._db.read() as db:
            rows.story_row(db, story_id)
            return rows.story_infos(db, story_id)[0]

    def find(self, text: str, *, first: str | None = None, limit: int = MAX_FOUND) -> list[Found]:
        """The nodes of the writer's stories where `text` ends (`weave.loom.find`), the story
        `first`'s before the others', at most `limit`."""
        with self._db.read() as db:
            return find(rows.node_texts(db, first), text, limit=limit)

    def load(self, story_id: str) -> Loom:
        """The story's loom as stored now: every node, the stored cursor. Raises `StoryNotFound`."""
        with self._db.read() as db:
            return rows.read_loom(db, story_id)

    def update(self, story_id: str, move: Callable[[Loom], Loom]) -> Loom:
        """Apply `move` to the loom as stored now (at this writer's place), save what it
        added, and return it as saved. Raises `InvalidInput` when it removes or changes a
        node, `ReadOnlyStory` when it adds one to a story shared to read; `move`'s own errors
        (`NoSuchNode`) come through; either way nothing is written."""
        with self._db.write() as db:
            old = rows.read_loom(db, story_id)
            return rows.save_changes(db, story_id, old, move(old))

    def watch(self, story_id: str) -> Callable[[], int]:
        """A function answering how many nodes the story has now, cheap enough for a page to
        ask twice a second (PostgreSQL: as the server's notifications say; SQLite: counted).
        Raises `StoryNotFound` when the writer does not see the story."""
        with self._db.read() as db:
            rows.story_row(db, story_id)
        return self._db.counter(story_id)

    def rename(self, story_id: str, title: str) -> None:
        """Set the title; a blank one is `InvalidInput`: a box cleared by mistake loses no title."""
        if not rows.checked(title).strip():
            raise InvalidInput("a title needs a visible character; the old title is kept")
        with self._db.write() as db:
            rows.story_row(db, story_id, "own")
            db.execute("UPDATE stories SET title = ?, updated = ? WHERE id = ?",
                       (db.text(title), time.time(), story_id))  # fmt: skip

    def delete(self, story_id: str) -> None:
        """Mark a story deleted (kept, and restorable, until purged)."""
        self._set(story_id, "deleted = coalesce(deleted, ?)", time.time())

    def give(self, story_id: str, email: str) -> str:
        """Hand one of this writer's stories to the writer `email` names (an address as
        `weave.access.writer_for` gives it): the one login with that verified address,
        or, until one has logged in, the address, theirs at login
        (`weave.loom.store_writers`). It leaves this writer's list. Returns the new owner.

        Raises:
            SharedAddress: several logins have that address; `give_to` names one.
        """
        if not isinstance(email, str) or not email.strip():
            raise InvalidInput("a story can only be given to a writer named by a login")
        with self._db.write() as db:
            rows.story_row(db, story_id, "own")
            owner = writers.owner_for(db, email)
            db.execute("UPDATE stories SET owner = ? WHERE id = ?", (owner, story_id))
            db.execute("DELETE FROM shares WHERE story_id = ? AND writer = ?", (story_id, owner))
        return owner

    def give_to(self, story_id: str, writer: str) -> None:
        """Hand one of this writer's stories to the login `writer` (`Login.writer`: issuer
        and subject), which must have logged in here."""
        with self._db.write() as db:
            rows.story_row(db, story_id, "own")
            if not writers.has_logged_in(db, writer):
                raise InvalidInput(f"no login {writer!r} (issuer and subject) has logged in here")
            db.execute("UPDATE stories SET owner = ? WHERE id = ?", (writer, story_id))
            db.execute("DELETE FROM shares WHERE story_id = ? AND writer = ?", (story_id, writer))

    def share(self, story_id: str, email: str, *, may_write: bool) -> None:
        """Share one of this writer's stories with the writer `email` names (as `give` names
        one), to read or (`may_write`) to co-write; again, to change which. They see it in
        their list and keep their own place in it; the story stays this writer's."""
        if not isinstance(email, str) or not email.strip():
            raise InvalidInput("a story can only be shared with a writer named by a login")
        with self._db.write() as db:
            rows.story_row(db, story_id, "own")
            who = writers.owner_for(db, email)
            if who == self.writer:
                raise InvalidInput(f"story {story_id} is yours already")
            db.execute(
                "INSERT INTO shares (story_id, writer, may_write) VALUES (?, ?, ?) "
                "ON CONFLICT (story_id, writer) DO UPDATE SET may_write = excluded.may_write",
                (story_id, who, bool(may_write)),
            )

    def unshare(self, story_id: str, email: str) -> None:
        """Stop sharing the story with the writer `email` names; their place in it goes."""
        with self._db.write() as db:
            rows.story_row(db, story_id, "own")
            who = (story_id, writers.owner_for(db, email))
            for table in ("checkouts", "bookmarks", "shares"):
                db.execute(f"DELETE FROM {table} WHERE story_id = ? AND writer = ?", who)

    def shares(self, story_id: str) -> list[Share]:
        """Whom this writer's story is shared with (by address), and how."""
        with self._db.read() as db:
            return rows.shares(db, story_id)

    def sign_in(self, email: str) -> int:
        """This store's writer (a login's `weave.access.Login.writer`) logged in with the
        address `email`, which their provider verified: the stories kept for that address
        become theirs. Returns how many did."""
        with self._db.write() as db:
            return writers.sign_in(db, self.writer, email, time.time())

    def restore(self, story_id: str) -> None:
        self._set(story_id, "deleted = ?", None)

    def purge(self, story_id: str) -> None:
        """Remove a deleted story and all its nodes for real. Raises `NotDeleted`."""
        with self._db.write() as db:
            if rows.story_row(db, story_id, "own")["deleted"] is None:
                raise NotDeleted(f"only a deleted story can be purged; delete {story_id} first")
            db.secure_delete()
            for table in ("suggestions", "bookmarks", "checkouts", "shares", "nodes"):
                db.execute(f"DELETE FROM {table} WHERE story_id = ?", (story_id,))
            db.execute("DELETE FROM stories WHERE id = ?", (story_id,))
        self._db.reclaim()

    # -- what goes with a story ---------------------------------------------------------
    def settings(self, story_id: str) -> dict:
        """The story's search settings; {} when none were saved."""
        with self._db.read() as db:
            value = rows.story_row(db, story_id)["settings"]
        return {} if value is None else rows.loads(value, story_id)

    def save_settings(self, story_id: str, settings: Mapping[str, Any]) -> None:
        """Replace the story's settings (its owner or a co-writer)."""
        value = rows.dumps(dict(settings), "the settings")
        self._set(story_id, "settings = ?", value, may="write")

    def suggestions(self, story_id: str, node_id: str) -> dict | None:
        """The search saved for `node_id`; None when there is none."""
        with self._db.read() as db:
            return rows.suggestions(db, story_id).get(node_id)

    def save_suggestions(self, story_id: str, node_id: str, data: Mapping[str, Any] | None) -> None:
        """Replace the search kept for `node_id` (None forgets it); anyone who sees the story
        may: it is a record of what the model offered there, not the story."""
        value = None if data is None else rows.dumps(dict(data), "the suggestions")
        with self._db.write() as db:
            rows.story_row(db, story_id)
            key = (story_id, node_id)
            if not db.execute("SELECT 1 FROM nodes WHERE story_id = ? AND id = ?", key).fetchone():
                raise InvalidInput(f"story {story_id} has no node {node_id!r}")
            db.execute("DELETE FROM suggestions WHERE story_id = ? AND node = ?", key)
            if value is not None:
                db.execute("INSERT INTO suggestions (story_id, node, data) VALUES (?, ?, ?)",
                           (*key, value))  # fmt: skip

    # -- whole stories: what an import inserts, what an export writes ------------------
    def saved(self, story_id: str) -> SavedStory:
        """The whole story as an export holds it: its loom, title, settings and searches
        (`weave.interop.files` writes it in a file's format)."""
        with self._db.read() as db:
            return rows.read_story(db, story_id)

    def insert(self, story: SavedStory) -> str:
        """Keep `story` (a file's, read and checked by `weave.interop.files`) as a new story
        of this writer's; its id."""
        story_id = new_id()
        with self._db.write() as db:
            rows.insert_story(db, story_id, story)
        return story_id

    def _set(self, story_id: str, assignments: str, *values: Any, may: str = "own") -> None:
        with self._db.write() as db:
            rows.story_row(db, story_id, may)
            db.execute(f"UPDATE stories SET {assignments} WHERE id = ?", (*values, story_id))
