"""A story's rows <-> its loom (and the list of stories), inside the caller's transaction.

Values are written as strict JSON (NaN and infinities refused: `InvalidInput`). Rows another
program wrote are read so the story stays readable with the text they wrote: a BLOB text
decoded (bad bytes as U+FFFD), a number stored as text parsed, and a node's score, time,
ids, model, params or provenance that still cannot be read dropped (records of how it was
made; ids are made again from the text). What would change the story's shape is a
`DamagedStory` naming the story and node: a parent missing or after its child (a cycle), an
unknown kind, no cursor or root, a saved setting or search that is not JSON.

The owner filter is here alone: `story_row` (the gate of every read or change of a story)
and `story_infos` (the list) see only the stories of the connection's writer (SQL's
`writer()`), and a new story is theirs; another writer's story is `StoryNotFound`.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from weave.loom.find import StoryNodes
from weave.loom.formats import MAX_SCORE, TOKEN_ID_LIMIT, SavedStory, finite_only
from weave.loom.loom import KINDS, Loom, Node, title_for
from weave.loom.provenance import Provenance
from weave.loom.store_errors import DamagedStory, InvalidInput, StoryNotFound

TITLE_BYTES = 4096  # of the opening node's text, read to make a title


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
    """The story's row, when it is the connection's writer's. Raises `StoryNotFound`."""
    mine = "SELECT * FROM stories WHERE id = ? AND owner = writer()"
    if (row := db.execute(mine, (story_id,)).fetchone()) is None:
        raise StoryNotFound(f"no story {story_id} in the store (purged, or never saved here)")
    return row


def read_loom(db: sqlite3.Connection, story_id: str) -> Loom:
    """The story's loom as stored, or `DamagedStory` naming the node whose place in the
    tree cannot be read. Nodes are read in the order they were added, a parent before its
    children, so a cycle is a node whose parent is not read yet: no walk can loop."""
    story = story_row(db, story_id)
    nodes: dict[str, Node] = {}
    for r in db.execute("SELECT * FROM nodes WHERE story_id = ? ORDER BY seq", (story_id,)):
        node_id, parent, kind = text_value(r["id"]), r["parent"], text_value(r["kind"])
        parent = None if parent is None else text_value(parent)
        if (parent is None) != (not nodes) or (parent is not None and parent not in nodes):
            raise _damaged(story_id, f"node {node_id!r} comes before its parent {parent!r}")
        if kind not in KINDS:
            raise _damaged(story_id, f"node {node_id!r} has an unknown kind {kind!r}")
        params, model = _json(r["params"]), r["model"]
        if (score := number(r["score"])) is not None and abs(score) > MAX_SCORE:
            score = None
        nodes[node_id] = Node(
            node_id, parent, text_value(r["text"]), kind, _ids(_json(r["token_ids"])),
            model if isinstance(model, str) else None, params if isinstance(params, dict) else None,
            score, number(r["created"]) or 0.0, _provenance(_json(r["provenance"])),
        )  # fmt: skip
    if story["cursor"] not in nodes or story["root"] != next(iter(nodes), None):
        raise _damaged(story_id, "its cursor or root is missing")
    records = "SELECT * FROM {} WHERE story_id = ?"
    found = db.execute(records.format("checkouts"), (story_id,))
    checkouts = {r["parent"]: r["child"] for r in found
                 if r["child"] in nodes and nodes[r["child"]].parent == r["parent"]}  # fmt: skip
    marks = {r["node"] for r in db.execute(records.format("bookmarks"), (story_id,))}
    return Loom(nodes, story["root"], story["cursor"], checkouts, frozenset(marks & nodes.keys()))


def read_story(db: sqlite3.Connection, story_id: str) -> SavedStory:
    """The whole story as an export holds it (less what JSON cannot hold)."""
    row = story_row(db, story_id)
    title = None if row["title"] is None else text_value(row["title"])
    settings = {} if row["settings"] is None else loads(row["settings"], story_id)
    created, updated = (number(row[column]) or 0.0 for column in ("created", "updated"))
    loom, shown = read_loom(db, story_id), suggestions(db, story_id)
    return finite_only(SavedStory(loom, title, created, settings, shown, updated))


def suggestions(db: sqlite3.Connection, story_id: str) -> dict[str, Any]:
    """The searches saved for the story's nodes, by node id."""
    story_row(db, story_id)
    found = db.execute("SELECT * FROM suggestions WHERE story_id = ? ORDER BY node", (story_id,))
    return {text_value(r["node"]): loads(r["data"], story_id) for r in found}


def _damaged(story_id: str, what: str) -> DamagedStory:
    return DamagedStory(
        f"story {story_id} cannot be read: {what}; the file may be damaged or written by "
        "another program: export the other stories and keep a copy of it"
    )


def text_value(value: object) -> str:
    """A text column's value as text, whatever another program stored there."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def number(value: Any) -> float | None:
    """A number column's value as a finite float; None when it holds none."""
    if isinstance(value, str | bytes):
        with suppress(ValueError):
            value = float(value)
    return float(value) if type(value) in (int, float) and math.isfinite(value) else None


def _provenance(value: Any) -> Provenance | None:
    """A stored provenance; None (unknown) when there is none or it cannot be read."""
    with suppress(ValueError, TypeError):
        return None if value is None else Provenance.from_dict(value)
    return None


def _ids(value: Any) -> tuple[int, ...] | None:
    ok = isinstance(value, list) and all(type(i) is int and 0 <= i < TOKEN_ID_LIMIT for i in value)
    return tuple(value) if ok else None


def _json(value: Any) -> Any:
    """A node's JSON record, or None when it cannot be read (it is only a record)."""
    with suppress(ValueError, TypeError, RecursionError):
        return None if value is None else json.loads(value)
    return None


def story_infos(db: sqlite3.Connection, story_id: str | None = None) -> list[StoryInfo]:
    """The writer's stories (or the one `story_id`, when it is theirs), last updated first.
    An untitled story is titled by its opening as it reads now: the first node on the path
    to its cursor (an edit that rewrote the whole story retitles it), else its first node."""
    where = "WHERE s.owner = writer()" + (" AND s.id = ?" if story_id is not None else "")
    found = db.execute(
        f"""SELECT s.id, s.title, s.created, s.updated, s.deleted,
            (SELECT COUNT(*) FROM nodes WHERE story_id = s.id) AS nodes,
            coalesce((WITH RECURSIVE up(id, parent) AS (
                    SELECT id, parent FROM nodes WHERE story_id = s.id AND id = s.cursor
                    UNION SELECT n.id, n.parent FROM nodes n  -- UNION: a damaged cycle ends
                        JOIN up ON n.story_id = s.id AND n.id = up.parent)
                SELECT substr(CAST(n.text AS BLOB), 1, {TITLE_BYTES}) FROM up
                    JOIN nodes n ON n.story_id = s.id AND n.id = up.id
                WHERE up.parent = s.root),
                (SELECT substr(CAST(text AS BLOB), 1, {TITLE_BYTES}) FROM nodes
                    WHERE story_id = s.id AND seq = 1)) AS opening
        FROM stories s {where} ORDER BY s.updated DESC, s.created DESC, s.id""",
        () if story_id is None else (story_id,),
    )
    return [StoryInfo(r["id"], _title(r["title"], r["opening"]), r["nodes"],
                      number(r["created"]) or 0.0, number(r["updated"]) or 0.0,
                      r["deleted"] is not None) for r in found]  # fmt: skip


def node_texts(db: sqlite3.Connection, first: str | None = None) -> Iterator[StoryNodes]:
    """The nodes of each of the writer's stories not deleted, parent first (`weave.loom.find`):
    the story `first` before the others, then the others last updated first."""
    titles = {i.id: i.title for i in story_infos(db) if not i.deleted}
    order = sorted(titles, key=lambda story_id: story_id != first)  # stable: updated first
    for story_id in order:
        found = db.execute("SELECT id, parent, text FROM nodes WHERE story_id = ? ORDER BY seq",
                           (story_id,)).fetchall()  # fmt: skip
        ids, parents, texts = (list(column) for column in zip(*found, strict=True))
        yield StoryNodes(
            story_id, titles[story_id], [_text(i) for i in ids],
            [None if p is None else _text(p) for p in parents], [_text(t) for t in texts],
        )  # fmt: skip


def _text(value: object) -> str:
    """`text_value`, with the common case first: a node's columns are almost always text."""
    return value if isinstance(value, str) else text_value(value)


def _title(title: Any, opening: bytes | None) -> str:
    """The title, else the first words of the opening (bytes that may end mid-character)."""
    opening_text = (opening or b"").decode("utf-8", "ignore")
    return title_for(opening_text) if title is None else text_value(title)


def loads(value: str, story_id: str) -> Any:
    """A JSON value saved for `story_id`; raises `DamagedStory` when it is not JSON."""
    try:
        return json.loads(value)
    except (ValueError, TypeError, RecursionError) as e:
        raise _damaged(story_id, f"a saved value is not JSON ({e})") from e


# -- writing a story ----------------------------------------------------------------------
def checked(text: str) -> str:
    """`text`, when the store can keep it; raises `InvalidInput` saying why not."""
    if not isinstance(text, str):
        raise InvalidInput(f"a text must be a str, not {type(text).__name__}")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise InvalidInput("a text holds a lone surrogate: clean it first") from None
    return text


def dumps(value: Any, what: str) -> str:
    """`value` as strict JSON; raises `InvalidInput` naming `what` when it cannot be."""
    try:  # ASCII: a lone surrogate in a value is kept, escaped; NaN and infinities refused
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{what} cannot be saved as JSON: {e}") from e


def insert_story(db: sqlite3.Connection, story_id: str, story: SavedStory) -> None:
    """A whole story (new or imported), less what `finite_only` leaves out."""
    story = finite_only(story)
    loom, now = story.loom, time.time()
    if story.title is None:
        story = replace(story, title=_numbered(db, loom))
    db.execute(
        "INSERT INTO stories (id, title, created, updated, settings, root, cursor, owner) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, writer())",
        (story_id, story.title, story.created, now, dumps(story.settings, "the settings"),
         loom.root, loom.cursor),
    )  # fmt: skip
    _insert_nodes(db, story_id, list(loom.nodes.values()), 0)
    _save_records(db, story_id, Loom({}, loom.root, loom.root), loom)
    shown = [(story_id, n, dumps(d, "the suggestions")) for n, d in story.suggestions.items()]
    db.executemany("INSERT INTO suggestions VALUES (?, ?, ?)", shown)


def _numbered(db: sqlite3.Connection, loom: Loom) -> str | None:
    """A new story's title when its first line is another story's title already: that
    line and the first number free ("Once upon a time, (2)"); None (its first line,
    read as it is listed) when no story of the writer's has it."""
    first = next((n for n in loom.nodes.values() if n.parent == loom.root), None)
    base = title_for(first.text if first is not None else "")
    taken = {info.title for info in story_infos(db) if not info.deleted}
    if base not in taken:
        return None
    return next(f"{base} ({n})" for n in range(2, len(taken) + 3) if f"{base} ({n})" not in taken)


def _insert_nodes(db: sqlite3.Connection, story_id: str, nodes: list[Node], seq: int) -> None:
    for node in nodes:
        if node.score is not None and not math.isfinite(node.score):
            raise InvalidInput(f"node {node.id!r} has a score that is not a finite number")
    db.executemany(
        "INSERT INTO nodes (story_id, id, seq, parent, kind, token_ids, model, params, "
        "score, created, text, provenance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((story_id, n.id, seq, n.parent, n.kind,
          None if n.token_ids is None else dumps(list(n.token_ids), "the token ids"),
          n.model, None if n.params is None else dumps(n.params, "the params"), n.score,
          n.created, checked(n.text),
          None if n.provenance is None else dumps(n.provenance.to_dict(), "the provenance"))
         for seq, n in enumerate(nodes, start=seq)),
    )  # fmt: skip


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
    changed = [(story_id, p, c) for p, c in new.checkouts.items() if old.checkouts.get(p) != c]
    db.executemany("INSERT OR REPLACE INTO checkouts VALUES (?, ?, ?)", changed)
    gone = old.checkouts.keys() - new.checkouts.keys()
    db.executemany("DELETE FROM checkouts WHERE story_id = ? AND parent = ?",
                   [(story_id, parent) for parent in gone])  # fmt: skip
    db.executemany("INSERT INTO bookmarks VALUES (?, ?)",
                   [(story_id, n) for n in new.bookmarks - old.bookmarks])  # fmt: skip
    db.executemany("DELETE FROM bookmarks WHERE story_id = ? AND node = ?",
                   [(story_id, n) for n in old.bookmarks - new.bookmarks])  # fmt: skip
