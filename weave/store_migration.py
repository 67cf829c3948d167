"""The migration of a store file from schema 2 (the store before the loom) or 3 (before
owners) to the schema now.

Schema 2 kept a log per story: its states (whole texts) and undo/redo rows. `migrate`
copies the file to a backup beside it, then in one transaction replays each story's log
into a loom (`weave.loom_formats.loom_from_log`) and writes it as schema 3's rows
(`weave.store_rows`). Schema 3 files gain an owner column in one transaction (no copy:
it only adds a column). Every story migrated belongs to the machine's local writer: it was
made before login. Deciding when to migrate, and turning an `sqlite3.Error` into a
`StoreError`, are `weave.store_file`'s.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import suppress
from pathlib import Path

from weave.loom_formats import LogRow, SavedStory, loom_from_log, without_surrogates
from weave.store_errors import NotLoomDatabase, StorageUnwritable
from weave.store_rows import insert_story
from weave.store_schema import LOCAL_WRITER, SCHEMA, SCHEMA_VERSION


def migrate(db: sqlite3.Connection, path: Path, version: int) -> None:
    """Schema 3 to now in one transaction; schema 2 likewise, after a backup copy beside
    the file."""
    if version == 3:
        _add_owners(db)
        return
    if version != 2:
        raise NotLoomDatabase(
            f"the database at {path} has schema {version}, from a LLooM too old "
            "for this one to read; it was left untouched"
        )
    # Another process may migrate the file meanwhile: a copy that is no longer of
    # schema 2 is not a backup, and must not replace one.
    backup = path.with_name(f"{path.name}.v{version}-backup")
    partial = backup.with_name(f"{backup.name}.{os.getpid()}-partial")
    copy = sqlite3.connect(partial)
    try:
        db.backup(copy)
        copied = copy.execute("PRAGMA user_version").fetchone()[0]
    finally:
        copy.close()
    try:
        if copied != version:
            partial.unlink()
            return
        os.replace(partial, backup)
    except OSError as e:
        with suppress(OSError):
            partial.unlink(missing_ok=True)
        raise StorageUnwritable(
            f"could not keep a backup of {path} as {backup.name} before upgrading it ({e}); "
            "the file was left untouched"
        ) from e
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] == 2:  # not another process
            _migrate_2_to_3(db)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _add_owners(db: sqlite3.Connection) -> None:
    """Schema 3 to 4: each story gets an owner, the local writer (see `LOCAL_WRITER`)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] == 3:  # not another process
            db.execute(
                f"ALTER TABLE stories ADD COLUMN owner TEXT NOT NULL DEFAULT '{LOCAL_WRITER}'"
            )
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


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
        insert_story(db, old["id"], story)
        db.execute(
            "UPDATE stories SET updated = ?, deleted = ?, owner = ? WHERE id = ?",
            (old["updated"], old["deleted"], LOCAL_WRITER, old["id"]),
        )
    db.execute("DROP TABLE log_v2")
    db.execute("DROP TABLE stories_v2")


def _old_text(value: bytes | str) -> str:
    text = value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value
    return without_surrogates(text)
