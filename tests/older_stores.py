"""An SQLite story file as an older LLooM wrote it, made from one of today's: each step
undoes one of `weave.loom.store_file.MIGRATIONS`, newest first, so a test of a migration
opens the very shape the older release left."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from weave.loom.store_sql import SCHEMA_VERSION

UNDO = {  # schema N+1 -> N
    6: (
        "DROP TABLE shares",
        "CREATE TABLE checkouts_6 (story_id TEXT NOT NULL, parent TEXT NOT NULL, "
        "child TEXT NOT NULL, PRIMARY KEY (story_id, parent), "
        "FOREIGN KEY (story_id, child) REFERENCES nodes(story_id, id))",
        "INSERT INTO checkouts_6 SELECT story_id, parent, child FROM checkouts WHERE writer = ''",
        "DROP TABLE checkouts",
        "ALTER TABLE checkouts_6 RENAME TO checkouts",
        "CREATE TABLE bookmarks_6 (story_id TEXT NOT NULL, node TEXT NOT NULL, "
        "PRIMARY KEY (story_id, node), "
        "FOREIGN KEY (story_id, node) REFERENCES nodes(story_id, id))",
        "INSERT INTO bookmarks_6 SELECT story_id, node FROM bookmarks WHERE writer = ''",
        "DROP TABLE bookmarks",
        "ALTER TABLE bookmarks_6 RENAME TO bookmarks",
    ),
    5: ("ALTER TABLE nodes DROP COLUMN provenance",),
    4: ("DROP TABLE writers",),
    3: ("ALTER TABLE stories DROP COLUMN owner",),
}


def as_schema(path: Path, version: int) -> None:
    """Make the story file at `path` as schema `version` wrote it."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for step in range(SCHEMA_VERSION - 1, version - 1, -1):
            for statement in UNDO[step]:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {version}")
    finally:
        db.close()
