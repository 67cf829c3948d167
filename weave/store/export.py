"""A story's JSON export: the document `export_json` writes and `import_json` reads.

This module owns the document's shape (format "lloom-story", version 1: title, times,
settings, tree, and the whole log as "history") and the checks an import must pass: each
entry well formed, and the log one that `save`, `undo` and `redo` could have written.
How a str survives ASCII JSON is `weave.store.encoding`'s; reading the story and writing
the imported one is `weave.store.story_store`'s.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time

from weave.store.encoding import _escaped, _json, _text, _unescaped
from weave.store.errors import BadImport
from weave.store.log import _settings, _tree
from weave.store.values import (
    FIRST_KINDS,
    MOVE_KINDS,
    SAVE_KINDS,
    _check_str,
    _Row,
    _state_row,
    _title_value,
)

EXPORT_FORMAT = "lloom-story"
EXPORT_VERSION = 1


# -- writing ------------------------------------------------------------------------------
def _export_document(story_id: str, story: sqlite3.Row, rows: list[_Row]) -> str:
    """The export of `story` (its row in `stories`) and its log `rows`, as ASCII JSON."""
    data = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "id": story_id,
        "title": None if story["title"] is None else _text(story["title"]),
        "created_at": story["created"],
        "updated_at": story["updated"],
        "exported_at": time.time(),
        "settings": _settings(story),
        "tree": _tree(story),
        "history": [_row_to_json(r) for r in rows],
    }
    return json.dumps(_escaped(data), ensure_ascii=True, indent=1, allow_nan=False)


def _row_to_json(row: _Row) -> dict:
    if row.text is None:
        return {"version": row.seq, "kind": row.kind, "created_at": row.created, "state": row.state}
    return {
        "version": row.seq, "kind": row.kind, "created_at": row.created, "parent": row.parent,
        "text": row.text, "token_ids": None if row.token_ids is None else list(row.token_ids),
        "model": row.model,
    }  # fmt: skip


# -- reading ------------------------------------------------------------------------------
def _parse_export(data: str | bytes) -> dict:
    """Checked values for a new story from `export_json`'s output."""
    try:
        doc = _unescaped(json.loads(data))
    except (ValueError, UnicodeDecodeError, TypeError) as e:
        raise BadImport(f"not a LLooM story export: it is not JSON ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
        raise BadImport(f'not a LLooM story export (no "format": "{EXPORT_FORMAT}")')
    if doc.get("version") != EXPORT_VERSION:
        raise BadImport(
            f"a LLooM story export of version {doc.get('version')!r}; this LLooM reads "
            f"version {EXPORT_VERSION}"
        )
    history = doc.get("history")
    if not isinstance(history, list) or not history:
        raise BadImport("the story export has no history")
    try:
        rows = [_row_from_json(i, item) for i, item in enumerate(history)]
        _check_log(rows)
        title = doc.get("title")
        if title is not None:
            _check_str(title, "the title")
        settings, tree = doc.get("settings") or {}, doc.get("tree")
        if not isinstance(settings, dict) or not (tree is None or isinstance(tree, dict)):
            raise ValueError("its settings must be an object, its tree an object or null")
        return {
            "title": _title_value(title), "rows": rows,
            "created_at": _number(doc.get("created_at", rows[0].created), "its created_at"),
            "settings": _json(settings, "the settings"),
            "tree": None if tree is None else _json(tree, "the tree"),
        }  # fmt: skip
    except (ValueError, TypeError) as e:
        raise BadImport(f"the story export cannot be imported: {e}") from e


def _row_from_json(index: int, item: object) -> _Row:
    if not isinstance(item, dict) or item.get("version") != index:
        raise ValueError(f"history entry {index} is not an object with version {index}")
    kind, created = item.get("kind"), _number(item.get("created_at"), f"entry {index}'s time")
    if kind in MOVE_KINDS:
        state = item.get("state")
        if type(state) is not int:
            raise ValueError(f"history entry {index} ({kind}) names no state")
        return _Row(index, kind, state, None, created)
    if kind not in FIRST_KINDS + SAVE_KINDS:
        raise ValueError(f"history entry {index} has an unknown kind {kind!r}")
    parent = item.get("parent")
    if parent is not None and type(parent) is not int:
        raise ValueError(f"history entry {index} has a parent that is not a version")
    return _state_row(
        index, kind, parent, created, item.get("text"), item.get("token_ids"), item.get("model")
    )


def _number(value: object, what: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ValueError(f"{what} is not a time in seconds")
    return float(value)


def _check_log(rows: list[_Row]) -> None:
    """Replay a log as `save`, `undo` and `redo` write it; raises ValueError where not.

    The model is the editor's: a list of states (the branch) and a position in it.
    """
    branch: list[int] = []
    at = -1
    for row in rows:
        if row.kind in MOVE_KINDS:
            to = branch.index(row.state) if row.state in branch else None
            if to is None or to == at or (to < at) != (row.kind == "undo"):
                raise ValueError(
                    f"history entry {row.seq} ({row.kind} to {row.state}) does not move "
                    f"{'back' if row.kind == 'undo' else 'forward'} along the story"
                )
            at = to
            continue
        if row.kind not in (FIRST_KINDS if row.seq == 0 else SAVE_KINDS):
            raise ValueError(f"history entry {row.seq} cannot be of kind {row.kind!r}")
        if row.parent != (branch[at] if branch else None):
            raise ValueError(f"history entry {row.seq} was not made from the state before it")
        del branch[at + 1 :]
        branch.append(row.seq)
        at = len(branch) - 1
