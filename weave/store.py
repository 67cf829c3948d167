"""The story store: stories and their whole history in SQLite, in the data folder.

`Store` is the durable `weave.session.Book`. Every change is a row appended to
`changes`, each naming the state it came from (`parent`), so history is a tree that is
only ever added to: undo and redo move the story's `current` pointer along the branch
that ends at its `tip`; an edit after an undo starts a new branch (the redo path is no
longer offered, but its rows stay). Delete only marks a story; purge, for deleted
stories alone, removes it for real. Titles, settings and the last search are the
story's metadata and are simply replaced.

Text is stored as UTF-8 bytes with `surrogatepass`, so any Python string, lone
surrogates and NUL included, comes back exactly. The database runs in WAL mode with a
busy timeout, one short connection per operation, so page sessions in threads and
several processes can share it. A file that is not a LLooM database is never written
to: opening it fails with a `BookError` that says so. This module owns the schema and
the SQL; what a history means to the page is `weave.session`'s.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from weave.session import BookError, Change, Entry, Saved, title_for

FILE_NAME = "stories.sqlite3"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x4C6F6F6D  # "Loom": marks the file as ours
BUSY_MS = 5000

SCHEMA = """
CREATE TABLE IF NOT EXISTS stories (
    id TEXT PRIMARY KEY,
    title BLOB NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    tip INTEGER NOT NULL,
    current INTEGER NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}',
    search TEXT
);
CREATE TABLE IF NOT EXISTS changes (
    story_id TEXT NOT NULL REFERENCES stories(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    parent INTEGER,
    text BLOB NOT NULL,
    kind TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (story_id, seq)
);
"""


class Store:
    """Stories in `folder/stories.sqlite3` (the folder is made when missing)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder).expanduser()
        self.path = self.folder / FILE_NAME
        self.location = str(self.folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BookError(f"cannot create the data folder {self.folder}: {e.strerror}") from e
        self._open()

    # -- the Book protocol ---------------------------------------------------------------
    def create(self, text: str, *, kind: str = "start", title: str | None = None) -> str:
        story_id = uuid.uuid4().hex[:12]
        now = time.time()
        with self._write() as db:
            db.execute(
                "INSERT INTO stories (id, title, created, updated, tip, current) "
                "VALUES (?, ?, ?, ?, 0, 0)",
                (story_id, _enc(title or title_for(text)), now, now),
            )
            db.execute(
                "INSERT INTO changes (story_id, seq, parent, text, kind, created) "
                "VALUES (?, 0, NULL, ?, ?, ?)",
                (story_id, _enc(text), kind, now),
            )
        return story_id

    def record(self, story_id: str, text: str, kind: str) -> None:
        """Append a state after the current one; it becomes the tip and the current state."""
        with self._write() as db:
            current = self._row(db, story_id)["current"]
            seq = db.execute(
                "SELECT MAX(seq) + 1 FROM changes WHERE story_id = ?", (story_id,)
            ).fetchone()[0]
            db.execute(
                "INSERT INTO changes (story_id, seq, parent, text, kind, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (story_id, seq, current, _enc(text), kind, time.time()),
            )
            db.execute(
                "UPDATE stories SET tip = ?, current = ?, updated = ? WHERE id = ?",
                (seq, seq, time.time(), story_id),
            )

    def move(self, story_id: str, position: int) -> None:
        """Undo/redo: point at state `position` of the branch that ends at the tip."""
        with self._write() as db:
            branch = self._branch(db, story_id)
            if not 0 <= position < len(branch):
                raise BookError(f"story {story_id} has no state {position}")
            db.execute(
                "UPDATE stories SET current = ?, updated = ? WHERE id = ?",
                (branch[position][0], time.time(), story_id),
            )

    def load(self, story_id: str) -> Saved | None:
        with self._read() as db:
            row = db.execute("SELECT * FROM stories WHERE id = ?", (story_id,)).fetchone()
            if row is None:
                return None
            branch = self._branch(db, story_id)
        seqs = [seq for seq, _ in branch]
        return Saved(
            id=story_id,
            title=_dec(row["title"]),
            history=tuple(change for _, change in branch),
            position=seqs.index(row["current"]),
            # Damaged JSON raises ValueError, which the session reports as a damaged story.
            settings=json.loads(row["settings"]),
            search=json.loads(row["search"]) if row["search"] else None,
        )

    def stories(self, *, deleted: bool = False) -> list[Entry]:
        with self._read() as db:
            rows = db.execute(
                "SELECT id, title, updated, deleted FROM stories WHERE deleted = ? "
                "ORDER BY updated DESC",
                (int(deleted),),
            ).fetchall()
        return [Entry(r["id"], _dec(r["title"]), r["updated"], bool(r["deleted"])) for r in rows]

    def rename(self, story_id: str, title: str) -> None:
        self._set(story_id, "title", _enc(title))

    def delete(self, story_id: str) -> None:
        self._set(story_id, "deleted", 1)

    def restore(self, story_id: str) -> None:
        self._set(story_id, "deleted", 0)

    def purge(self, story_id: str) -> None:
        with self._write() as db:
            if not self._row(db, story_id)["deleted"]:
                raise BookError("only a deleted story can be purged")
            db.execute("DELETE FROM changes WHERE story_id = ?", (story_id,))
            db.execute("DELETE FROM stories WHERE id = ?", (story_id,))

    def save_settings(self, story_id: str, settings: dict) -> None:
        self._set(story_id, "settings", json.dumps(settings, ensure_ascii=False), edit=False)

    def save_search(self, story_id: str, search: dict) -> None:
        self._set(story_id, "search", json.dumps(search, ensure_ascii=False), edit=False)

    def all_changes(self, story_id: str) -> list[Change]:
        """Every state ever recorded, abandoned branches too, oldest first (for recovery)."""
        with self._read() as db:
            rows = db.execute(
                "SELECT text, kind FROM changes WHERE story_id = ? ORDER BY seq", (story_id,)
            ).fetchall()
        return [Change(_dec(r["text"]), r["kind"]) for r in rows]

    # -- internals -----------------------------------------------------------------------
    def _open(self) -> None:
        """Create or check the schema; a foreign or damaged file is left untouched."""
        existed = self.path.exists() and self.path.stat().st_size > 0
        with self._connect() as db:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            if existed and app_id != APPLICATION_ID:
                raise self._foreign()
            db.execute("PRAGMA journal_mode = WAL")
            if not existed:
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.executescript(SCHEMA)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise BookError(
                    f"{self.path} was written by a newer LLooM (schema {version}); "
                    "upgrade LLooM to open it"
                )

    def _foreign(self) -> BookError:
        return BookError(
            f"{self.path} is not a LLooM database or is damaged; it was left untouched; "
            "move it aside (or set LLOOM_DATA_DIR) and start again"
        )

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
        except sqlite3.Error as e:
            raise self._error(e) from e
        db.row_factory = sqlite3.Row
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            yield db
        except sqlite3.DatabaseError as e:
            raise self._error(e) from e
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            yield db

    def _error(self, e: sqlite3.Error) -> BookError:
        text = str(e)
        if "not a database" in text or "malformed" in text:
            return self._foreign()
        if "locked" in text or "busy" in text:
            return BookError(f"{self.path} stayed locked by another program for {BUSY_MS} ms")
        if "readonly" in text or "unable to open" in text:
            return BookError(f"cannot write {self.path}: check the data folder's permissions")
        return BookError(f"the story store at {self.path} failed: {text}")

    def _row(self, db: sqlite3.Connection, story_id: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM stories WHERE id = ?", (story_id,)).fetchone()
        if row is None:
            raise BookError(f"no story {story_id} in {self.path}")
        return row

    def _branch(self, db: sqlite3.Connection, story_id: str) -> list[tuple[int, Change]]:
        """The states from the first to the tip, following parents back from the tip."""
        tip = self._row(db, story_id)["tip"]
        rows = db.execute(
            "SELECT seq, parent, text, kind FROM changes WHERE story_id = ?", (story_id,)
        ).fetchall()
        by_seq = {r["seq"]: r for r in rows}
        branch, seq = [], tip
        while seq is not None:
            row = by_seq[seq]
            branch.append((seq, Change(_dec(row["text"]), row["kind"])))
            seq = row["parent"]
        return branch[::-1]

    def _set(self, story_id: str, column: str, value, *, edit: bool = True) -> None:
        """Set one column; `edit` also marks the story as edited now (the list's order)."""
        with self._write() as db:
            self._row(db, story_id)
            db.execute(f"UPDATE stories SET {column} = ? WHERE id = ?", (value, story_id))
            if edit:
                db.execute("UPDATE stories SET updated = ? WHERE id = ?", (time.time(), story_id))


def _enc(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _dec(data: bytes | str) -> str:
    return data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
