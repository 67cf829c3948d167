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
`writer()`) and those shared with them (`VISIBLE`), and a new story is theirs; any other
writer's story is `StoryNotFound`. The gate says what the writer may do there (`ROLE`): an
owner anything, a co-writer add nodes and settings, a reader move their own place only
(`ReadOnlyStory`, `NotOwner`). Each writer has their own place in a story (the cursor,
checkouts and bookmarks: the owner's on the story's row, `PLACE_OF_OWNER`; a co-writer's
or reader's on their share), and a node a logged-in writer adds says who made it
(`Provenance.writer`, stamped here). The SQL is written once for both databases
(`weave.loom.store_sql.Db`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from weave.loom.find import StoryNodes
from weave.loom.formats import MAX_SCORE, TOKEN_ID_LIMIT, SavedStory, finite_only
from weave.loom.loom import KINDS, Loom, Node, title_for
from weave.loom.provenance import Provenance
from weave.loom.store_errors import (
    DamagedStory,
    InvalidInput,
    NotOwner,
    ReadOnlyStory,
    StoryNotFound,
)
from weave.loom.store_sql import PLACE_OF_OWNER, Db, Row
from weave.loom.store_writers import email_of

TITLE_BYTES = 4096  # of the opening node's text, read to make a title
# The owner filter: the stories a writer sees (`s`), their share of each (`h`) if any, and
# what they may do there. A deleted story is its owner's alone.
SHARED = "LEFT JOIN shares h ON h.story_id = s.id AND h.writer = writer()"
VISIBLE = "(s.owner = writer() OR (h.writer IS NOT NULL AND s.deleted IS NULL))"
ROLE = ("CASE WHEN s.owner = writer() THEN 'owner' WHEN h.may_write THEN 'co-writer' "
        "ELSE 'reader' END")  # fmt: skip
MAY = {"read": ("owner", "co-writer", "reader"), "write": ("owner", "co-writer"),
       "own": ("owner",)}  # fmt: skip


@dataclass(frozen=True)
class StoryInfo:
    """A story as a list shows it."""

    id: str
    title: str
    nodes: int  # the root included
    created: float
    updated: float  # its last change: a node, a move, a bookmark, its title
    deleted: bool
    role: str = "owner"  # "owner", or "co-writer" / "reader" of a story shared with them
    owner: str | None = None  # who shared it with them (an address); None: their own


@dataclass(frozen=True)
class Share:
    """A writer a story is shared with: their address (or key, before a login named one),
    and whether they may write."""

    email: str
    may_write: bool


# -- reading a story ----------------------------------------------------------------------
def story_row(db: Db, story_id: str, may: str = "read") -> Row:
    """The story's row when the connection's writer may `may` there ("read", "write": add
    nodes, change its settings; "own": rename, delete, give, share), with their `role`,
    their `place` and their cursor (`at`). Raises `StoryNotFound` (not theirs, nor shared
    with them), `ReadOnlyStory` or `NotOwner`. In a write it holds the row to the end."""
    gate = (f"SELECT s.*, {ROLE} AS role, CASE WHEN s.owner = writer() THEN ? ELSE writer() END "
            "AS place, CASE WHEN s.owner = writer() THEN s.cursor ELSE "
            f"COALESCE(h.cursor, s.cursor) END AS at FROM stories s {SHARED} "
            f"WHERE s.id = ? AND {VISIBLE}{db.locked}")  # fmt: skip
    if (row := db.execute(gate, (PLACE_OF_OWNER, story_id)).fetchone()) is None:
        raise StoryNotFound(f"no story {story_id} in the store (purged, or never saved here)")
    if row["role"] not in MAY[may]:
        if may == "write":
            raise ReadOnlyStory(
                f"story {story_id} was shared with you to read, not to write: nothing was "
                "changed; ask its owner to let you co-write"
            )
        raise NotOwner(f"story {story_id} was shared with you: only its owner may rename, "
                       "delete, give or share it")  # fmt: skip
    return row


def read_loom(db: Db, story_id: str) -> Loom:
    """The story's loom as stored, at the writer's place, or `DamagedStory` naming the node
    whose place in the tree cannot be read. Nodes are read in the order they were added, a
    parent before its children, so a cycle is a node whose parent is not read yet: no walk
    can loop."""
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
    if story["at"] not in nodes or story["root"] != next(iter(nodes), None):
        raise _damaged(story_id, "its cursor or root is missing")
    place = (story_id, story["place"])
    records = "SELECT * FROM {} WHERE story_id = ? AND writer = ?"
    found = db.execute(records.format("checkouts"), place)
    checkouts = {r["parent"]: r["child"] for r in found
                 if r["child"] in nodes and nodes[r["child"]].parent == r["parent"]}  # fmt: skip
    marks = {r["node"] for r in db.execute(records.format("bookmarks"), place)}
    return Loom(nodes, story["root"], story["at"], checkouts, frozenset(marks & nodes.keys()))


def read_story(db: Db, story_id: str) -> SavedStory:
    """The whole story as an export holds it (less what JSON cannot hold)."""
    row = story_row(db, story_id)
    title = None if row["title"] is None else text_value(row["title"])
    settings = {} if row["settings"] is None else loads(row["settings"], story_id)
    created, updated = (number(row[column]) or 0.0 for column in ("created", "updated"))
    loom, shown = read_loom(db, story_id), suggestions(db, story_id)
    return finite_only(SavedStory(loom, title, created, settings, shown, updated))


def suggestions(db: Db, story_id: str) -> dict[str, Any]:
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


def story_infos(db: Db, story_id: str | None = None) -> list[StoryInfo]:
    """The writer's stories and those shared with them (or the one `story_id`, when they
    see it), last updated first. An untitled story is titled by its opening as it reads
    now: the first node on the path to its owner's cursor (an edit that rewrote the whole
    story retitles it), else its first node."""
    where = f"WHERE {VISIBLE}" + (" AND s.id = ?" if story_id is not None else "")
    found = db.execute(
        f"""SELECT s.id, s.title, s.created, s.updated, s.deleted, {ROLE} AS role,
            COALESCE(w.email, s.owner) AS owner,
            (SELECT COUNT(*) FROM nodes WHERE story_id = s.id) AS nodes,
            coalesce((WITH RECURSIVE up(id, parent) AS (
                    SELECT id, parent FROM nodes WHERE story_id = s.id AND id = s.cursor
                    UNION SELECT n.id, n.parent FROM nodes n  -- UNION: a damaged cycle ends
                        JOIN up ON n.story_id = s.id AND n.id = up.parent)
                SELECT {db.opening("n.text", TITLE_BYTES)} FROM up
                    JOIN nodes n ON n.story_id = s.id AND n.id = up.id
                WHERE up.parent = s.root),
                (SELECT {db.opening("text", TITLE_BYTES)} FROM nodes
                    WHERE story_id = s.id AND seq = 1)) AS opening
        FROM stories s {SHARED} LEFT JOIN writers w ON w.writer = s.owner
        {where} ORDER BY s.updated DESC, s.created DESC, s.id""",
        () if story_id is None else (story_id,),
    )
    return [StoryInfo(r["id"], _title(r["title"], r["opening"]), r["nodes"],
                      number(r["created"]) or 0.0, number(r["updated"]) or 0.0,
                      r["deleted"] is not None, r["role"],
                      None if r["role"] == "owner" else text_value(r["owner"]))
            for r in found]  # fmt: skip


def node_texts(db: Db, first: str | None = None) -> Iterator[StoryNodes]:
    """The nodes of each story the writer sees, not deleted, parent first (`weave.loom.find`):
    the story `first` before the others, then the others last updated first."""
    titles = {i.id: i.title for i in story_infos(db) if not i.deleted}
    order = sorted(titles, key=lambda story_id: story_id != first)  # stable: updated first
    for story_id in order:
        found = db.execute("SELECT id, parent, text FROM nodes WHERE story_id = ? ORDER BY seq",
                           (story_id,)).fetchall()  # fmt: skip
        yield StoryNodes(
            story_id, titles[story_id], [_text(r["id"]) for r in found],
            [None if r["parent"] is None else _text(r["parent"]) for r in found],
            [_text(r["text"]) for r in found],
        )  # fmt: skip


def shares(db: Db, story_id: str) -> list[Share]:
    """Whom the story is shared with (its owner asks), by address."""
    story_row(db, story_id, "own")
    found = db.execute(
        "SELECT COALESCE(w.email, h.writer) AS email, h.may_write FROM shares h "
        "LEFT JOIN writers w ON w.writer = h.writer WHERE h.story_id = ? ORDER BY email",
        (story_id,),
    )
    return [Share(text_value(r["email"]), bool(r["may_write"])) for r in found]


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


def insert_story(db: Db, story_id: str, story: SavedStory) -> None:
    """A whole story (new or imported), the writer's, less what `finite_only` leaves out."""
    story = finite_only(story)
    loom, now = story.loom, time.time()
    if story.title is None:
        story = replace(story, title=_numbered(db, loom))
    db.execute(
        "INSERT INTO stories (id, title, created, updated, settings, root, cursor, owner) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, writer())",
        (story_id, None if story.title is None else db.text(checked(story.title)), story.created,
         now, dumps(story.settings, "the settings"), loom.root, loom.cursor),
    )  # fmt: skip
    _insert_nodes(db, story_id, list(loom.nodes.values()), 0)
    _save_records(db, story_id, PLACE_OF_OWNER, Loom({}, loom.root, loom.root), loom)
    shown = [(story_id, n, dumps(d, "the suggestions")) for n, d in story.suggestions.items()]
    db.executemany("INSERT INTO suggestions (story_id, node, data) VALUES (?, ?, ?)", shown)


def _numbered(db: Db, loom: Loom) -> str | None:
    """A new story's title when its first line is another story's title already: that
    line and the first number free ("Once upon a time, (2)"); None (its first line,
    read as it is listed) when no story the writer sees has it."""
    first = next((n for n in loom.nodes.values() if n.parent == loom.root), None)
    base = title_for(first.text if first is not None else "")
    taken = {info.title for info in story_infos(db) if not info.deleted}
    if base not in taken:
        return None
    return next(f"{base} ({n})" for n in range(2, len(taken) + 3) if f"{base} ({n})" not in taken)


def _insert_nodes(db: Db, story_id: str, nodes: list[Node], seq: int) -> None:
    for node in nodes:
        if node.score is not None and not math.isfinite(node.score):
            raise InvalidInput(f"node {node.id!r} has a score that is not a finite number")
    db.executemany(
        "INSERT INTO nodes (story_id, id, seq, parent, kind, token_ids, model, params, "
        "score, created, text, provenance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((story_id, n.id, seq, n.parent, n.kind,
          None if n.token_ids is None else dumps(list(n.token_ids), "the token ids"),
          n.model, None if n.params is None else dumps(n.params, "the params"), n.score,
          n.created, db.text(checked(n.text)),
          None if n.provenance is None else dumps(n.provenance.to_dict(), "the provenance"))
         for seq, n in enumerate(nodes, start=seq)),
    )  # fmt: skip


def save_changes(db: Db, story_id: str, old: Loom, new: Loom) -> Loom:
    """Write what `new` adds to `old`: nodes (each saying who made it: `stamped`), and the
    writer's place (cursor, checkouts, bookmarks); returns `new` as saved."""
    if not isinstance(new, Loom) or new.root != old.root:
        raise InvalidInput("a move must return the story's loom")
    if any(new.nodes.get(node_id) != node for node_id, node in old.nodes.items()):
        raise InvalidInput("a move cannot remove or change a node: nodes are only added")
    added = [node for node_id, node in new.nodes.items() if node_id not in old.nodes]
    story, now = story_row(db, story_id, "write" if added else "read"), time.time()
    if added:
        new = stamped(new, added, email_of(db))
        _insert_nodes(db, story_id, [new.nodes[node.id] for node in added], len(old.nodes))
        db.grew(story_id, len(new.nodes))
    _save_records(db, story_id, story["place"], old, new)
    cursor = new.node(new.cursor).id
    if story["role"] == "owner":
        db.execute("UPDATE stories SET cursor = ?, updated = ? WHERE id = ?",
                   (cursor, now, story_id))  # fmt: skip
    else:
        db.execute("UPDATE shares SET cursor = ? WHERE story_id = ? AND writer = writer()",
                   (cursor, story_id))  # fmt: skip
        if added:
            db.execute("UPDATE stories SET updated = ? WHERE id = ?", (now, story_id))
    return new


def stamped(loom: Loom, added: list[Node], writer: str | None) -> Loom:
    """`loom` with each of its `added` nodes' provenance saying `writer` made it (a logged-in
    writer's address; None, the machine's own writer: nothing to say)."""
    if writer is None:
        return loom
    nodes = dict(loom.nodes)
    for node in added:
        if node.provenance is not None:
            nodes[node.id] = replace(node, provenance=replace(node.provenance, writer=writer))
    return replace(loom, nodes=nodes)


def _save_records(db: Db, story_id: str, place: str, old: Loom, new: Loom) -> None:
    """The writer's place (`place`: `PLACE_OF_OWNER`, or a sharer's key) as `new` has it."""
    changed = [(story_id, place, p, c) for p, c in new.checkouts.items()
               if old.checkouts.get(p) != c]  # fmt: skip
    db.executemany("INSERT INTO checkouts (story_id, writer, parent, child) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (story_id, writer, parent) DO UPDATE SET child = excluded.child",
                   changed)  # fmt: skip
    gone = old.checkouts.keys() - new.checkouts.keys()
    db.executemany("DELETE FROM checkouts WHERE story_id = ? AND writer = ? AND parent = ?",
                   [(story_id, place, parent) for parent in gone])  # fmt: skip
    db.executemany("INSERT INTO bookmarks (story_id, writer, node) VALUES (?, ?, ?)",
                   [(story_id, place, n) for n in new.bookmarks - old.bookmarks])  # fmt: skip
    db.executemany("DELETE FROM bookmarks WHERE story_id = ? AND writer = ? AND node = ?",
                   [(story_id, place, n) for n in old.bookmarks - new.bookmarks])  # fmt: skip
