"""A story's log: the queries that read and append it, inside a caller's transaction.

History is a log per story, only ever appended to. A row either writes a state (kind
"create", "import", "edit" or "accept": its text, maybe the token ids and the model they
belong to, and `parent`, the state it was made from) or goes back to one (kind "undo" or
"redo": `state`, the row whose state is current again). The current state is the one
the last row names, and the last row's number is the story's `version`. Like an editor:
the states from the first to the newest written one (following parents) are the branch
that undo and redo walk, undo to the current state's parent, redo to its child on the
branch; a save after an undo writes a state whose parent is the current one, so it
becomes the newest and the undone states leave the branch (redo no longer applies; their
rows stay, for `history` and export). Reopening the file restores the pointer: it is the
log.

This module owns those queries and the decoding of what they read (rows, titles,
settings, tree); every function takes an open connection. Transactions and connections
are `weave.store.database`'s, the tables `weave.store.schema`'s, and deciding what to
append (dedupe, undo, redo) `weave.store.story_store`'s.
"""

from __future__ import annotations

import json
import sqlite3
import time

from weave.session import title_for
from weave.store.encoding import _blob, _load_json, _text
from weave.store.errors import StoryNotFound, _Unreadable
from weave.store.values import StoryInfo, StoryState, Timeline, _Row

TITLE_BYTES = 4096  # of the first text, read to make a title
_ROW_COLUMNS = "seq, kind, state, parent, created, model, token_ids, text"


# -- reading ------------------------------------------------------------------------------
def _story(db: sqlite3.Connection, story_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM stories WHERE id = ?", (story_id,)).fetchone()
    if row is None:
        raise StoryNotFound(f"no story {story_id} in the store (purged, or never saved here)")
    return row


def _head(db: sqlite3.Connection, story_id: str) -> tuple[StoryState, _Row]:
    """The current state, and the row that wrote it."""
    last = db.execute(
        "SELECT seq, kind, state, created FROM log WHERE story_id = ? ORDER BY seq DESC LIMIT 1",
        (story_id,),
    ).fetchone()
    if last is None:
        _story(db, story_id)
        raise _Unreadable("it has no history")
    row = _select_row(db, story_id, last["state"])
    move = _Row(last["seq"], last["kind"], last["state"], None, last["created"])
    return _state(story_id, move, row), row


def _select_row(db: sqlite3.Connection, story_id: str, seq: int) -> _Row:
    found = db.execute(
        f"SELECT {_ROW_COLUMNS} FROM log WHERE story_id = ? AND seq = ?", (story_id, seq)
    ).fetchone()
    if found is None or found["text"] is None:
        raise _Unreadable(f"its state {seq} is missing")
    return _row(found)


def _rows(db: sqlite3.Connection, story_id: str) -> list[_Row]:
    query = f"SELECT {_ROW_COLUMNS} FROM log WHERE story_id = ? ORDER BY seq"
    return [_row(r) for r in db.execute(query, (story_id,))]


def _branch(db: sqlite3.Connection, story_id: str) -> list[int]:
    """The written states from the first to the newest, following parents back."""
    parents = dict(
        db.execute("SELECT seq, parent FROM log WHERE story_id = ? AND state = seq", (story_id,))
    )
    branch, seq = [], max(parents)
    while seq is not None:
        branch.append(seq)
        seq = parents[seq]
    return branch[::-1]


def _redo_target(db: sqlite3.Connection, story_id: str, current: int) -> int | None:
    branch = _branch(db, story_id)
    at = branch.index(current)
    return branch[at + 1] if at + 1 < len(branch) else None


def _timeline(db: sqlite3.Connection, story_id: str) -> Timeline:
    current = _head(db, story_id)[1].seq
    branch = _branch(db, story_id)
    states: list[StoryState] = []
    for start in range(0, len(branch), 500):  # under SQLite's limit on parameters
        chunk = branch[start : start + 500]
        rows = db.execute(
            f"SELECT {_ROW_COLUMNS} FROM log WHERE story_id = ? "
            f"AND seq IN ({','.join('?' * len(chunk))}) ORDER BY seq",
            (story_id, *chunk),
        )
        states += (_state(story_id, r, r) for r in map(_row, rows))
    return Timeline(tuple(states), branch.index(current))


def _infos(db: sqlite3.Connection, *, story_id: str | None = None) -> list[StoryInfo]:
    where = "WHERE s.id = ?" if story_id is not None else ""
    rows = db.execute(
        f"""SELECT s.id, s.title, s.created, s.updated, s.deleted,
            (SELECT COUNT(*) FROM log WHERE story_id = s.id) AS versions,
            (SELECT substr(text, 1, {TITLE_BYTES}) FROM log WHERE story_id = s.id
                AND state = seq AND length(text) > 0 ORDER BY seq LIMIT 1) AS opening
        FROM stories s {where} ORDER BY s.updated DESC, s.created DESC, s.id""",
        () if story_id is None else (story_id,),
    ).fetchall()
    if story_id is not None and not rows:
        _story(db, story_id)
    return [
        StoryInfo(
            id=r["id"],
            title=_title(r),
            updated_at=r["updated"],
            deleted=r["deleted"] is not None,
            history_len=r["versions"],
            created_at=r["created"],
        )
        for r in rows
    ]


def _title(story: sqlite3.Row) -> str:
    """A listed story's title; one that cannot be read does not hide the others."""
    try:
        if story["title"] is not None:
            return _text(story["title"])
        return _opening_title(story["opening"])
    except _Unreadable:
        return "(a title that cannot be read)"


def _opening_title(data: bytes | None) -> str:
    """The title made of a text's first bytes, which may end inside a character."""
    if data is None:
        return ""
    for end in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return title_for(data[:end].decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            continue
    raise _Unreadable("its first text is not UTF-8")


def _settings(story: sqlite3.Row) -> dict:
    if story["settings"] is None:
        return {}
    value = _load_json(story["settings"], "its settings are")
    if not isinstance(value, dict):
        raise _Unreadable("its settings are not a JSON object")
    return value


def _tree(story: sqlite3.Row) -> dict | None:
    return None if story["tree"] is None else _load_json(story["tree"], "its last tree is")


def _row(r: sqlite3.Row) -> _Row:
    ids = None
    if r["token_ids"] is not None:
        ids = _load_json(r["token_ids"], "its token ids are")
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise _Unreadable("its token ids are not a list of ints")
        ids = tuple(ids)
    return _Row(
        seq=r["seq"], kind=r["kind"], state=r["state"], parent=r["parent"], created=r["created"],
        text=None if r["text"] is None else _text(r["text"]), token_ids=ids,
        model=None if r["model"] is None else _text(r["model"]),
    )  # fmt: skip


def _state(story_id: str, version: _Row, state: _Row) -> StoryState:
    """The state that row `state` wrote, as current after row `version`."""
    assert state.text is not None, "a state row carries its text"
    return StoryState(
        story_id, version.seq, state.text, state.token_ids, state.model, version.kind,
        version.created,
    )  # fmt: skip


# -- appending ----------------------------------------------------------------------------
def _append_move(
    db: sqlite3.Connection, story_id: str, seq: int, kind: str, target: int
) -> StoryState:
    move = _Row(seq, kind, target, None, time.time())
    _insert(db, story_id, move)
    return _state(story_id, move, _select_row(db, story_id, target))


def _insert(db: sqlite3.Connection, story_id: str, row: _Row) -> None:
    """Append a log row; the story counts as edited now."""
    ids = None if row.token_ids is None else json.dumps(list(row.token_ids), allow_nan=False)
    db.execute(
        f"INSERT INTO log (story_id, {_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (story_id, row.seq, row.kind, row.state, row.parent, row.created,
         _blob(row.model), ids, _blob(row.text)),
    )  # fmt: skip
    db.execute("UPDATE stories SET updated = ? WHERE id = ?", (time.time(), story_id))
