"""The story store's schema: the tables, how a file is known to be ours, and migrations.

A file is opened only when its header says it is a LLooM database (SQLite with our
application id) and a quick check passes; anything else is never written to (a foreign
file is not even opened by SQLite). A new or empty file gets the schema; one written by
an older LLooM is migrated in one transaction, after a backup copy beside it; one
written by a newer LLooM is refused. Triggers refuse to change any log row, or to delete
one of a story that is not deleted (purge).

This module owns the tables, `SCHEMA_VERSION`, `APPLICATION_ID` and `MIGRATIONS`, and
`prepare`, which makes a `Database`'s file ready at opening. Connections and error
messages are `weave.store.database`'s; what the rows mean is `weave.store.log`'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from weave.session import title_for
from weave.store.database import FILE_NAME, Database
from weave.store.encoding import _blob, _text
from weave.store.errors import NewerDatabase, StorageUnwritable, _Unreadable
from weave.store.log import _insert
from weave.store.values import FIRST_KINDS, SAVE_KINDS, _Row

SCHEMA_VERSION = 2
APPLICATION_ID = 0x4C6F6F6D  # "Loom": marks the file as ours
_SQLITE_MAGIC = b"SQLite format 3\x00"

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


# -- opening ------------------------------------------------------------------------------
def prepare(database: Database) -> None:
    """Make `database`'s file ready: the schema in a new one, ours checked and migrated.

    Raises `StorageUnwritable`, `NotLoomDatabase` (a foreign or damaged file, left
    untouched), `NewerDatabase` or `DatabaseLocked`.
    """
    if _needs_schema(database):
        _initialise(database)
    _check_and_migrate(database)


def _needs_schema(database: Database) -> bool:
    """Whether the file is new; raises `NotLoomDatabase` for one that is not ours.

    Reads the header with plain file I/O, so a foreign file is never opened by SQLite.
    """
    try:
        with open(database.path, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        return True
    except OSError as e:
        raise StorageUnwritable(
            f"cannot read the database at {database.path}: {e.strerror}; check its permissions"
        ) from e
    if not head:
        return True
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        raise database.foreign()
    app_id = int.from_bytes(head[68:72], "big")
    schema_cookie = int.from_bytes(head[40:44], "big")
    if app_id == APPLICATION_ID:
        return False
    if app_id == 0 and schema_cookie == 0:  # an empty SQLite file: checked again below
        return True
    raise database.foreign()


def _initialise(database: Database) -> None:
    """Write the schema into a new or empty file (another process may be first)."""
    db = database.connect(create=True)
    try:
        db.execute("BEGIN IMMEDIATE")
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        tables = db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
        if app_id != 0 or tables:
            db.execute("ROLLBACK")
            if app_id != APPLICATION_ID:
                raise database.foreign()
            return
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for statement in SCHEMA:
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except sqlite3.Error as e:
        raise database.error(e) from e
    finally:
        db.close()


def _check_and_migrate(database: Database) -> None:
    """Check our file, migrate it, switch it to WAL and make sure it is writable."""
    db = database.connect()
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise NewerDatabase(
                f"the database at {database.path} was written by a newer LLooM (schema "
                f"{version}, this one reads {SCHEMA_VERSION}); it was left untouched; "
                "upgrade LLooM to open it"
            )
        if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            raise database.foreign()
        if version < SCHEMA_VERSION:
            _migrate(database, db, version)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        if not {"stories", "log"} <= tables:
            raise database.foreign()
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("BEGIN IMMEDIATE")  # a read-only file or folder fails here, not later
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("ROLLBACK")
    except sqlite3.Error as e:
        raise database.error(e) from e
    except _Unreadable as e:  # a migration met a value it cannot read
        raise database.foreign() from e
    finally:
        db.close()


def _migrate(database: Database, db: sqlite3.Connection, version: int) -> None:
    """Run `MIGRATIONS` from `version` up in one transaction, after a backup copy."""
    if version not in MIGRATIONS:
        raise database.foreign()
    copy = sqlite3.connect(database.folder / f"{FILE_NAME}.v{version}-backup")
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


# -- migrations ---------------------------------------------------------------------------
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
