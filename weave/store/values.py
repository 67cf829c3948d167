"""The story store's values: what it returns, one log row, and the checks on what it is given.

This module owns the public dataclasses (`StoryState`, `StoryInfo`, `Timeline`), the
row of a story's log as Python sees it (`_Row`), the kinds of row, and the checks that
turn a caller's arguments into values the store can keep (raising `InvalidInput`). It
does no I/O: reading and writing rows is `weave.store.log`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from weave.store.encoding import _blob
from weave.store.errors import InvalidInput

FIRST_KINDS = ("create", "import")  # how a story's first state is made
SAVE_KINDS = ("edit", "accept", "import")  # how a later state is made
MOVE_KINDS = ("undo", "redo")


@dataclass(frozen=True)
class StoryState:
    """A story at one version: the state current after log row `version`."""

    story_id: str
    version: int
    text: str
    token_ids: tuple[int, ...] | None  # exact ids of `text` for `model`, when known
    model: str | None
    kind: str  # how this version came: create, import, edit, accept, undo, redo
    created_at: float  # seconds since the epoch


@dataclass(frozen=True)
class StoryInfo:
    """A story as a list shows it."""

    id: str
    title: str
    updated_at: float  # last change to its text or title
    deleted: bool
    history_len: int  # rows in its log: the number of versions
    created_at: float


@dataclass(frozen=True)
class Timeline:
    """The states undo and redo walk, oldest first, and the index of the current one."""

    states: tuple[StoryState, ...]
    position: int


@dataclass(frozen=True)
class _Row:
    """One log row as stored (text rows carry their state; move rows name one)."""

    seq: int
    kind: str
    state: int
    parent: int | None
    created: float
    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    model: str | None = None


# -- values in ----------------------------------------------------------------------------
def _check_id(story_id: str | None) -> str | None:
    if story_id is not None and not isinstance(story_id, str):
        raise InvalidInput(f"a story id is a str, not {type(story_id).__name__}")
    return story_id


def _check_kind(kind: str, allowed: tuple[str, ...]) -> None:
    if kind not in allowed:
        raise InvalidInput(f"kind must be one of {', '.join(allowed)}, not {kind!r}")


def _check_str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a str, not {type(value).__name__}")
    return value


def _check_ids(token_ids: object) -> tuple[int, ...] | None:
    if token_ids is None:
        return None
    if isinstance(token_ids, str | bytes) or not isinstance(token_ids, Sequence):
        raise InvalidInput(f"token ids must be a list of ints, not {type(token_ids).__name__}")
    ids = tuple(token_ids)
    if not all(type(i) is int and i >= 0 for i in ids):
        raise InvalidInput("token ids must be non-negative ints")
    return ids


def _state_row(
    seq: int, kind: str, parent: int | None, created: float,
    text: object, token_ids: object, model: object,
) -> _Row:  # fmt: skip
    """A checked state row."""
    text = _check_str(text, "the text")
    model = None if model is None else _check_str(model, "the model")
    return _Row(seq, kind, seq, parent, created, text, _check_ids(token_ids), model)


def _title_value(title: str | None) -> bytes | None:
    return None if title is None or not title.strip() else _blob(title)
