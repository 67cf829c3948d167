"""A loom as JSON, and the older forms of a story read as looms.

The one export format is the whole loom as JSON (format "lloom-loom", version 1): every
node with all its fields, the cursor, the checked-out children, the bookmarks, the
story's title and settings, and the suggestions kept per node. `loom_document` writes it
and `read_document` reads it back exactly.

`read_document` also reads the two files LLooM wrote before the loom: the page's session
("lloom-session": a list of texts and a position) and the store's story export
("lloom-story": a log of states and undo/redo moves). Both, and the log of a database
being migrated, become a loom by replaying them (`loom_from_log`): each state is an edit
made at the state it came from, each undo or redo a move, so a linear history becomes a
chain and nothing written is lost. A lone surrogate in them (not a character: the page
showed it as U+FFFD) becomes U+FFFD.

Documents are strict JSON (no NaN or infinities). Suggestions or settings read back
holding one (a file edited by hand, a search saved before the backends checked) are not
kept (`finite_only`): the page says so where it meets them (`weave.session`).

This module is pure: it neither reads files nor knows SQLite (`weave.loom_store` does).
Every problem with a document is a `ValueError` saying what is wrong.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

from weave.finite import non_finite
from weave.loom import KINDS, Loom, Node

LOOM_FORMAT = "lloom-loom"
LOOM_VERSION = 1
_SURROGATE = re.compile("[\ud800-\udfff]")
_NODE_FIELDS = ("id", "parent", "text", "kind", "token_ids", "model", "params", "score", "created")


@dataclass(frozen=True)
class SavedStory:
    """A loom and what goes with it, as a document holds them."""

    loom: Loom
    title: str | None = None  # None: the story's first words
    created: float = 0.0
    settings: dict = field(default_factory=dict)
    suggestions: dict[str, dict] = field(default_factory=dict)  # node id -> search dict


@dataclass(frozen=True)
class LogRow:
    """One row of the log the store kept before the loom (schema 2)."""

    kind: str  # "create", "import", "edit", "accept": a state; "undo", "redo": a move
    created: float
    text: str | None = None  # a state's whole text
    parent: int | None = None  # a state's: the row it was made from
    state: int | None = None  # a move's: the row whose state it goes back to


# -- writing ------------------------------------------------------------------------------
def loom_document(story_id: str, story: SavedStory, updated: float) -> str:
    """The story as "lloom-loom" JSON (ASCII)."""
    loom = story.loom
    doc = {
        "format": LOOM_FORMAT,
        "version": LOOM_VERSION,
        "id": story_id,
        "title": story.title,
        "created": story.created,
        "updated": updated,
        "settings": story.settings,
        "root": loom.root,
        "cursor": loom.cursor,
        "checkouts": dict(loom.checkouts),
        "bookmarks": sorted(loom.bookmarks),
        "nodes": [_node_json(n) for n in loom.nodes.values()],
        "suggestions": story.suggestions,
    }
    return json.dumps(doc, ensure_ascii=True, indent=1, allow_nan=False)


def _node_json(node: Node) -> dict:
    values = {name: getattr(node, name) for name in _NODE_FIELDS}
    values["token_ids"] = None if node.token_ids is None else list(node.token_ids)
    if node.score is not None and not math.isfinite(node.score):  # saved before scores were
        values["score"] = None  # checked: JSON cannot hold it
    return values


def finite_only(story: SavedStory) -> SavedStory:
    """`story` less its suggestions that hold NaN or an infinity, and its settings if they
    do: JSON cannot hold them and a page cannot draw them."""
    suggestions = {n: data for n, data in story.suggestions.items() if non_finite(data) is None}
    settings = story.settings if non_finite(story.settings) is None else {}
    return replace(story, suggestions=suggestions, settings=settings)


# -- reading ------------------------------------------------------------------------------
def read_document(data: str | bytes) -> SavedStory:
    """A story from a "lloom-loom", "lloom-session" or "lloom-story" file."""
    try:
        doc = json.loads(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"it is not JSON ({e})") from e
    kind = doc.get("format") if isinstance(doc, dict) else None
    readers = {LOOM_FORMAT: _read_loom, "lloom-session": _read_session, "lloom-story": _read_log}
    if kind not in readers:
        raise ValueError(f'it is not a LLooM file (no "format": "{LOOM_FORMAT}")')
    try:
        return readers[kind](doc)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"a {kind} file with a missing or wrong value ({e!r})") from e


def _read_loom(doc: dict) -> SavedStory:
    if doc.get("version") != LOOM_VERSION:
        raise ValueError(
            f"a {LOOM_FORMAT} file of version {doc.get('version')!r}; this LLooM reads "
            f"version {LOOM_VERSION}: upgrade LLooM"
        )
    nodes: dict[str, Node] = {}
    for item in _list(doc["nodes"], "nodes"):
        node = _node(item)
        if node.id in nodes:
            raise ValueError(f"node {node.id!r} appears twice")
        first = not nodes
        if (node.parent is None) != first or not (first or node.parent in nodes):
            raise ValueError(f"node {node.id!r} does not come after its parent")
        nodes[node.id] = node
    root = next(iter(nodes.values()), None)
    if root is None or root.text or root.id != doc["root"]:
        raise ValueError("its first node must be the root, with no text")
    checkouts, marks = doc["checkouts"], doc["bookmarks"]
    named = [doc["cursor"], *checkouts.keys(), *checkouts.values(), *_list(marks, "bookmarks")]
    if not all(isinstance(n, str) and n in nodes for n in named):
        raise ValueError("its cursor, checkouts or bookmarks name a node it does not hold")
    suggestions = doc["suggestions"]
    if not all(k in nodes and isinstance(v, dict) for k, v in suggestions.items()):
        raise ValueError("its suggestions must be objects kept under nodes it holds")
    loom = Loom(nodes, root.id, doc["cursor"], dict(checkouts), frozenset(marks))
    return SavedStory(loom, _title(doc), _time(doc["created"]), _settings(doc), dict(suggestions))


def _node(item: Any) -> Node:
    if not isinstance(item, dict) or set(item) != set(_NODE_FIELDS):
        raise ValueError(f"a node must be an object with {', '.join(_NODE_FIELDS)}")
    if not all(isinstance(item[k], str) for k in ("id", "text", "kind")):
        raise ValueError("a node's id, text and kind are strings")
    ids, score, params = item["token_ids"], item["score"], item["params"]
    if ids is not None and not all(type(i) is int and i >= 0 for i in _list(ids, "token_ids")):
        raise ValueError(f"node {item['id']!r} has token ids that are not non-negative ints")
    if score is not None and type(score) not in (int, float):
        raise ValueError(f"node {item['id']!r} has a score that is not a number")
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"node {item['id']!r} has params that are not an object")
    if item["kind"] not in KINDS:
        raise ValueError(f"node {item['id']!r} has an unknown kind {item['kind']!r}")
    return Node(
        item["id"], item["parent"], item["text"], item["kind"],
        None if ids is None else tuple(ids), item["model"], params, score, _time(item["created"]),
    )  # fmt: skip


def _read_session(doc: dict) -> SavedStory:
    """The page's session file: its history of texts becomes a chain."""
    history = _list(doc["history"], "history")
    if not history or not all(isinstance(h, dict) and isinstance(h["text"], str) for h in history):
        raise ValueError("its history must be a non-empty list of objects with a text")
    now = time.time()  # a session file has no times
    rows = [LogRow("create", now, history[0]["text"])]
    rows += [LogRow("edit", now, h["text"], parent=i) for i, h in enumerate(history[1:])]
    position = doc.get("position", len(rows) - 1)
    if type(position) is int and 0 <= position < len(rows) - 1:
        rows.append(LogRow("undo", now, state=position))
    search = doc.get("search")
    loom = loom_from_log(rows)
    suggestions = {loom.cursor: search} if isinstance(search, dict) else {}
    return SavedStory(loom, _title(doc), now, _settings(doc), suggestions)


def _read_log(doc: dict) -> SavedStory:
    """The store's story export: its log is replayed."""
    rows = []
    for i, item in enumerate(_list(doc["history"], "history")):
        if item["version"] != i:
            raise ValueError(f"history entry {i} is numbered {item['version']!r}")
        rows.append(
            LogRow(item["kind"], _time(item["created_at"]), item.get("text"),
                   item.get("parent"), item.get("state"))
        )  # fmt: skip
    loom = loom_from_log(rows)
    tree = doc.get("tree")
    suggestions = {loom.cursor: tree} if isinstance(tree, dict) else {}
    return SavedStory(loom, _title(doc), _time(doc["created_at"]), _settings(doc), suggestions)


def loom_from_log(rows: list[LogRow]) -> Loom:
    """The loom a schema-2 log describes: states are edits at their parent, moves are moves.

    The first state is typed; an accepted state that extends its parent's text is an
    accepted node, any other state an edit. Raises ValueError for a log that names a row
    it does not hold.
    """
    if not rows or not isinstance(rows[0].text, str):
        raise ValueError("its history does not start with a text")
    first = rows[0]
    loom = Loom.new(without_surrogates(first.text), created=first.created)
    at = {0: loom.cursor}
    for seq, row in enumerate(rows[1:], start=1):
        if not isinstance(row.text, str):
            if row.kind not in ("undo", "redo") or row.state not in at:
                raise ValueError(f"history entry {seq} goes to a state that is not before it")
            loom = loom.go(at[row.state])
            continue
        if row.parent not in at:
            raise ValueError(f"history entry {seq} was not made from a state before it")
        base, text = loom.go(at[row.parent]), without_surrogates(row.text)
        extends = text.startswith(base.text())
        kind = "accepted" if row.kind == "accept" and extends else "edited"
        loom = base.edit(text, kind=kind, created=row.created)
        at[seq] = loom.cursor
    return loom


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate (a code point UTF-8 cannot hold) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise ValueError(f"its {what} must be a list")
    return value


def _time(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ValueError(f"a time must be seconds since the epoch, not {value!r}")
    return float(value)


def _title(doc: dict) -> str | None:
    title = doc.get("title")
    return without_surrogates(title) if isinstance(title, str) and title.strip() else None


def _settings(doc: dict) -> dict:
    settings = doc.get("settings")
    return settings if isinstance(settings, dict) else {}
