"""The story store's tables on a PostgreSQL server (`weave.loom.store_pg`): SQLite's tables
(`weave.loom.store_file`) in a schema of their own (`lloom`), with PostgreSQL's types (a
writer's text as UTF-8 `bytea`), the triggers that keep nodes append-only, and opening:
`checked_schema` creates the schema in an empty database, refuses one LLooM did not make or
a newer one, and migrates an older one step by step (`MIGRATIONS`: none yet, the first
PostgreSQL schema is 7).
"""

from __future__ import annotations

import psycopg

from weave.loom.store_errors import NewerDatabase, NotLoomDatabase
from weave.loom.store_sql import LOCAL_WRITER, PLACE_OF_OWNER, SCHEMA_VERSION

SCHEMA = "lloom"  # the PostgreSQL schema LLooM's tables live in
OPENING_LOCK = 0x4C6F6F6D  # "Loom": the advisory lock the processes opening one database take

TABLES = (
    f"""CREATE TABLE stories (
        id TEXT PRIMARY KEY,
        title BYTEA,               -- UTF-8; NULL: the first words of its first node
        created DOUBLE PRECISION NOT NULL,
        updated DOUBLE PRECISION NOT NULL,
        deleted DOUBLE PRECISION,  -- when it was deleted; NULL while it is not
        settings TEXT,             -- JSON object
        root TEXT NOT NULL,
        cursor TEXT NOT NULL,      -- the owner's
        owner TEXT NOT NULL DEFAULT '{LOCAL_WRITER}'
    )""",
    """CREATE TABLE nodes (
        story_id TEXT NOT NULL REFERENCES stories(id),
        id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        parent TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('typed', 'edited', 'accepted', 'sampled')),
        token_ids TEXT,
        model TEXT,
        params TEXT,
        score DOUBLE PRECISION,
        created DOUBLE PRECISION NOT NULL,
        text BYTEA NOT NULL,       -- UTF-8
        provenance TEXT,
        PRIMARY KEY (story_id, id),
        UNIQUE (story_id, seq),
        FOREIGN KEY (story_id, parent) REFERENCES nodes(story_id, id)
    )""",
    f"""CREATE TABLE checkouts (
        story_id TEXT NOT NULL, writer TEXT NOT NULL DEFAULT '{PLACE_OF_OWNER}',
        parent TEXT NOT NULL, child TEXT NOT NULL,
        PRIMARY KEY (story_id, writer, parent),
        FOREIGN KEY (story_id, child) REFERENCES nodes(story_id, id)
    )""",
    f"""CREATE TABLE bookmarks (
        story_id TEXT NOT NULL, writer TEXT NOT NULL DEFAULT '{PLACE_OF_OWNER}',
        node TEXT NOT NULL,
        PRIMARY KEY (story_id, writer, node),
        FOREIGN KEY (story_id, node) REFERENCES nodes(story_id, id)
    )""",
    """CREATE TABLE shares (
        story_id TEXT NOT NULL REFERENCES stories(id),
        writer TEXT NOT NULL,
        may_write BOOLEAN NOT NULL,
        cursor TEXT,
        PRIMARY KEY (story_id, writer)
    )""",
    """CREATE TABLE suggestions (
        story_id TEXT NOT NULL, node TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (story_id, node),
        FOREIGN KEY (story_id, node) REFERENCES nodes(story_id, id)
    )""",
    """CREATE TABLE writers (
        writer TEXT PRIMARY KEY,
        email TEXT NOT NULL,
        seen DOUBLE PRECISION NOT NULL
    )""",
    """CREATE FUNCTION writer() RETURNS TEXT LANGUAGE sql STABLE
        AS $$ SELECT current_setting('lloom.writer') $$""",
    """CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION '%', TG_ARGV[0]; END $$""",
    """CREATE FUNCTION nodes_go_with_purge() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF (SELECT deleted FROM stories WHERE id = OLD.story_id) IS NULL THEN
            RAISE EXCEPTION 'only a deleted story can be purged';
        END IF;
        RETURN OLD;
    END $$""",
    """CREATE TRIGGER nodes_stay BEFORE UPDATE ON nodes
        FOR EACH ROW EXECUTE FUNCTION refuse('nodes are never changed')""",
    """CREATE TRIGGER nodes_go_with_purge BEFORE DELETE ON nodes
        FOR EACH ROW EXECUTE FUNCTION nodes_go_with_purge()""",
    """CREATE TRIGGER stories_go_with_purge BEFORE DELETE ON stories
        FOR EACH ROW WHEN (OLD.deleted IS NULL)
        EXECUTE FUNCTION refuse('only a deleted story can be purged')""",
)
MIGRATIONS: dict[int, tuple[str, ...]] = {}  # schema N -> the statements that make it N + 1


def checked_schema(connection: psycopg.Connection, where: str) -> None:
    """Create LLooM's schema in a database without one, or check that the one there is
    LLooM's and migrate it to `SCHEMA_VERSION` (inside the caller's transaction, under its
    advisory lock); `where` names the database in an error. Raises `NotLoomDatabase` or
    `NewerDatabase`, the database left untouched."""
    found = connection.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s) AS schema, "
        "to_regclass(%s) IS NOT NULL AS meta", (SCHEMA, f"{SCHEMA}.meta"),
    ).fetchone()  # fmt: skip
    if not found["schema"]:
        connection.execute(f"CREATE SCHEMA {SCHEMA}")
        connection.execute("CREATE TABLE meta (application TEXT NOT NULL, version INTEGER)")
        connection.execute("INSERT INTO meta VALUES ('LLooM', %s)", (SCHEMA_VERSION,))
        for statement in TABLES:
            connection.execute(statement)
        return
    meta = found["meta"] and connection.execute("SELECT * FROM meta").fetchone()
    if not meta or meta["application"] != "LLooM":
        raise NotLoomDatabase(
            f"the database at {where} has a schema {SCHEMA!r} that LLooM did not make; "
            "it was left untouched; name another database (or drop that schema)"
        )
    version = meta["version"]
    if version > SCHEMA_VERSION:
        raise NewerDatabase(
            f"the database at {where} was written by a newer LLooM (schema {version}, "
            f"this one reads {SCHEMA_VERSION}); it was left untouched; upgrade LLooM"
        )
    while version in MIGRATIONS:
        for statement in MIGRATIONS[version]:
            connection.execute(statement)
        version += 1
    if version != SCHEMA_VERSION:
        raise NotLoomDatabase(
            f"the database at {where} has schema {version}, from a development build "
            "of LLooM that no release read; it was left untouched"
        )
    connection.execute("UPDATE meta SET version = %s", (SCHEMA_VERSION,))
