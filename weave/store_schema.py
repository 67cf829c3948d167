"""The story store's file format: its name, schema version, application id and tables.

The tables, as SQL: `stories` (a row a story: title, times, settings, root, cursor, and
its owner: the writer who may see it),
`nodes` (only ever added: triggers refuse to change one, or to delete one of a story that
is not deleted), and the small records beside them (`checkouts`, `bookmarks`,
`suggestions`). This module is facts only; opening and creating the file are
`weave.store_file`'s, the migration from schema 2 `weave.store_migration`'s.
"""

from __future__ import annotations

FILE_NAME = "stories.sqlite3"
SCHEMA_VERSION = 4  # 4: stories have an owner
APPLICATION_ID = 0x4C6F6F6D  # "Loom": marks the file as ours
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first bytes of every SQLite file
LOCAL_WRITER = "local"  # the owner of stories made without a login: this machine's writer

SCHEMA = (
    f"""CREATE TABLE stories (
        id TEXT PRIMARY KEY,
        title TEXT,           -- NULL: the first words of its first node
        created REAL NOT NULL,
        updated REAL NOT NULL,
        deleted REAL,         -- when it was deleted; NULL while it is not
        settings TEXT,        -- JSON object
        root TEXT NOT NULL,
        cursor TEXT NOT NULL,
        owner TEXT NOT NULL DEFAULT '{LOCAL_WRITER}'  -- the writer who may see it
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
