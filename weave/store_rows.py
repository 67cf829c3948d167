"""A story's rows <-> its loom: reading a story's rows into a `weave.loom.Loom` (and the
list of stories), and writing a new story or what a move added to one.

The owner filter is here, and only here: a connection belongs to one writer (SQL's
`writer()`, set by `weave.store_file`); `story_row`, the gate every read or change of a
story goes through, and `story_infos`, the list, see only that writer's stories, and a
new story is theirs. Another writer's story is, to them, no story (`StoryNotFound`).

Values are written as strict JSON: NaN or an infinity is refused (`InvalidInput`), and a
saved value that is not JSON reads back as `DamagedStory`. Every function takes an open
connection inside the caller's transaction; connecting, transactions and the schema are
`weave.store_file`'s and `weave.store_schema`'s, the tree's moves `weave.loom`'s.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from weave.loom import Loom, Node, title_for
from weave.loom_formats import SavedStory, finite_only, without_surrogates
from weave.store_errors import DamagedStory, InvalidInput, StoryNotFound

TITLE_BYTES = 4096  # of the first node's text, read to make a title


@dataclass(frozen=True)
class StoryInfo:
    """A story as a list shows it."""

    id: str
    title: str
    nodes: int  # the root included
    created: float
    updated: float  # its last change: a node, a move, a bookmark, its title
    deleted: bool


# -- reading a story ----------------------------------------------------------------------
def story_row(db: sqlite3.Connection, story_id: str) -> sqlite3.Row:
    """The story's row in `stories`, when it is the connection's writer's. Raises
    `StoryNotFound`."""
    row = db.execute(
        "SELECT * FROM stories WHERE id = ? AND owner = writer()", (story_id,)
    ).fetchone()
    if row is None:
        raise StoryNotFound(f"no story {story_id} in the store (purged, or never saved here)")
    return row


def read_loom(db: sqlite3.Connection, story_id: str) -> Loom:
    """The story's loom as stored: every node, the cursor, checkouts and bookmarks.

    Raises `StoryNotFound`, or `DamagedStory` when a value cannot be read back.
    """
    story = story_row(db, story_id)
    nodes = {}
    for r in db.execute("SELECT * FROM nodes WHERE story_id = ? ORDER BY seq", (story_id,)):
        ids = None if r["token_ids"] is None else tuple(loads(r["token_ids"], story_id))
        params = None if r["params"] is None else loads(r["params"], story_id)
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


def story_infos(db: sqlite3.Connection, story_id: str | None = None) -> list[StoryInfo]:
    """The writer's stories (or the one `story_id`, when it is theirs), last updated first."""
    where = "WHERE s.owner = writer()" + (" AND s.id = ?" if story_id is not None else "")
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


def loads(value: str, story_id: str) -> Any:
    """A JSON value saved for `story_id`; raises `DamagedStory` when it is not JSON."""
    try:
        return json.loads(value)
    except ValueError as e:
        raise DamagedStory(
            f"story {story_id} cannot be read: a saved value is not JSON ({e}); the file may "
            "be damaged: export what you can and keep a copy of it"
        ) from e


# -- writing a story ----------------------------------------------------------------------
def checked(text: str) -> str:
    """`text`, when the store can keep it; raises `InvalidInput` saying why not."""
    if not isinstance(text, str):
        raise InvalidInput(f"a text must be a str, not {type(text).__name__}")
    if without_surrogates(text) != text:
        raise InvalidInput("a text holds a lone surrogate (not a character); clean it first")
    return text


def title_value(title: str | None) -> str | None:
    """The title column's value: None (the first words of the story) for a blank one."""
    return None if title is None or not title.strip() else title


def dumps(value: Any, what: str) -> str:
    """`value` as strict JSON; raises `InvalidInput` naming `what` when it cannot be."""
    try:  # ASCII: a lone surrogate in a value is kept, escaped; NaN and infinities refused
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{what} cannot be saved as JSON: {e}") from e


def insert_story(db: sqlite3.Connection, story_id: str, story: SavedStory) -> None:
    """A whole story (imported or migrated); suggestions or settings holding NaN or an
    infinity are left out (`finite_only`)."""
    story = finite_only(story)
    loom, now = story.loom, time.time()
    db.execute(
        "INSERT INTO stories (id, title, created, updated, settings, root, cursor, owner) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, writer())",
        (story_id, story.title, story.created, now, dumps(story.settings, "the settings"),
         loom.root, loom.cursor),
    )  # fmt: skip
    _insert_nodes(db, story_id, list(loom.nodes.values()), 0)
    _save_records(db, story_id, Loom({}, loom.root, loom.root), loom)
    for node_id, data in story.suggestions.items():
        db.execute(
            "INSERT INTO suggestions (story_id, node, data) VALUES (?, ?, ?)",
            (story_id, node_id, dumps(data, "the suggestions")),
        )


def _insert_nodes(db: sqlite3.Connection, story_id: str, nodes: list[Node], seq: int) -> None:
    for node in nodes:
        if node.score is not None and not math.isfinite(node.score):
            raise InvalidInput(f"node {node.id!r} has a score that is not a finite number")
        db.execute(
            "INSERT INTO nodes (story_id, id, seq, parent, kind, token_ids, model, params, "
            "score, created, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (story_id, node.id, seq, node.parent, node.kind,
             None if node.token_ids is None else dumps(list(node.token_ids), "the token ids"),
             node.model, None if node.params is None else dumps(node.params, "the params"),
             node.score, node.created, checked(node.text)),
        )  # fmt: skip
        seq += 1


def save_changes(db: sqlite3.Connection, story_id: str, old: Loom, new: Loom) -> None:
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
