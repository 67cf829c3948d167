"""The story store's API: `StoryStore`, every story and its whole history in SQLite.

`StoryStore` keeps stories in `<data folder>/stories.sqlite3`: it creates, lists, renames,
deletes and purges them, saves their states and moves undo and redo along their log (what
those mean is `weave.store.log`'s docstring), and exports and imports them. A save equal
to the current state (text, ids and model) writes nothing.

A story's title is the first words of its first non-empty text until it is renamed
(renaming to blank goes back to that). Delete only marks a story; restore unmarks it;
purge removes a deleted story for real (secure_delete on, then the WAL truncated, best
effort: a reader holding an old snapshot keeps its copy until it lets go). Settings and
the tree are the latest ones, replaced on each save; they are not history, and saving
them is not an edit (the list's "last edited" order stays).

This module owns those operations. It leaves the file, its connections and its errors to
`weave.store.database`, the schema to `weave.store.schema`, the queries to
`weave.store.log`, and the export document to `weave.store.export`.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from weave.store.database import Database
from weave.store.encoding import _json
from weave.store.errors import InvalidInput, NotDeleted, StoreError
from weave.store.export import _export_document, _parse_export
from weave.store.log import (
    _append_move,
    _head,
    _infos,
    _insert,
    _redo_target,
    _rows,
    _settings,
    _state,
    _story,
    _timeline,
    _tree,
)
from weave.store.schema import prepare
from weave.store.values import (
    FIRST_KINDS,
    SAVE_KINDS,
    StoryInfo,
    StoryState,
    Timeline,
    _check_kind,
    _check_str,
    _state_row,
    _title_value,
)


class StoryStore:
    """Stories in `folder/stories.sqlite3`; the folder is made when missing.

    Opening raises `StorageUnwritable` (the folder or the file is not writable),
    `NotLoomDatabase` (a foreign or damaged file, left untouched), `NewerDatabase` or
    `DatabaseLocked`. An instance holds no connection: share it between threads.
    """

    def __init__(self, folder: str | os.PathLike[str]):
        self._db = Database(folder)
        self.folder = self._db.folder
        self.path = self._db.path
        prepare(self._db)

    # -- stories ----------------------------------------------------------------------
    def create(
        self,
        text: str = "",
        *,
        token_ids: Sequence[int] | None = None,
        model: str | None = None,
        title: str | None = None,
        kind: str = "create",
    ) -> str:
        """A new story whose first state is `text`; returns its id."""
        _check_kind(kind, FIRST_KINDS)
        if title is not None:
            _check_str(title, "the title")
        row = _state_row(0, kind, None, time.time(), text, token_ids, model)
        story_id = uuid.uuid4().hex[:12]
        with self._db.write(story_id) as db:
            db.execute(
                "INSERT INTO stories (id, title, created, updated) VALUES (?, ?, ?, ?)",
                (story_id, _title_value(title), row.created, row.created),
            )
            _insert(db, story_id, row)
        return story_id

    def get(self, story_id: str) -> StoryState:
        """The current state. Raises `StoryNotFound`."""
        with self._db.read(story_id) as db:
            return _head(db, story_id)[0]

    def info(self, story_id: str) -> StoryInfo:
        with self._db.read(story_id) as db:
            return _infos(db, story_id=story_id)[0]

    def list_stories(self, *, include_deleted: bool = False) -> list[StoryInfo]:
        """Saved stories, last edited first."""
        with self._db.read() as db:
            infos = _infos(db)
        return [i for i in infos if include_deleted or not i.deleted]

    def rename(self, story_id: str, title: str) -> None:
        """Set the title; a blank one goes back to the story's first words."""
        value = _title_value(_check_str(title, "the title"))
        with self._db.write(story_id) as db:
            _story(db, story_id)
            db.execute(
                "UPDATE stories SET title = ?, updated = ? WHERE id = ?",
                (value, time.time(), story_id),
            )

    def delete(self, story_id: str) -> None:
        """Mark a story deleted (kept, and restorable, until purged)."""
        with self._db.write(story_id) as db:
            _story(db, story_id)
            db.execute(
                "UPDATE stories SET deleted = ? WHERE id = ? AND deleted IS NULL",
                (time.time(), story_id),
            )

    def restore(self, story_id: str) -> None:
        with self._db.write(story_id) as db:
            _story(db, story_id)
            db.execute("UPDATE stories SET deleted = NULL WHERE id = ?", (story_id,))

    def purge(self, story_id: str) -> None:
        """Remove a deleted story and its whole history for real. Raises `NotDeleted`."""
        with self._db.write(story_id) as db:
            if _story(db, story_id)["deleted"] is None:
                raise NotDeleted(f"only a deleted story can be purged; delete {story_id} first")
            db.execute("PRAGMA secure_delete = ON")
            db.execute("DELETE FROM log WHERE story_id = ?", (story_id,))
            db.execute("DELETE FROM stories WHERE id = ?", (story_id,))
        # The WAL still holds the old pages until a checkpoint. A reader holding them only
        # delays it, so this is best effort, and its failure is no news to the caller.
        try:
            db = self._db.connect()
        except StoreError:
            return
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        finally:
            db.close()

    # -- states -------------------------------------------------------------------------
    def save(
        self,
        story_id: str,
        text: str,
        *,
        token_ids: Sequence[int] | None = None,
        model: str | None = None,
        kind: str = "edit",
    ) -> StoryState:
        """Append a state after the current one and return it.

        A save equal to the current state (text, ids and model) writes nothing and
        returns the current state. After an undo, the undone states leave the branch.
        """
        _check_kind(kind, SAVE_KINDS)
        return self._write_state(story_id, text, token_ids, model, kind, dedupe=True)

    def undo(self, story_id: str) -> StoryState | None:
        """Go back to the state before the current one; None when there is none."""
        with self._db.write(story_id) as db:
            state, row = _head(db, story_id)
            if row.parent is None:
                return None
            return _append_move(db, story_id, state.version + 1, "undo", row.parent)

    def redo(self, story_id: str) -> StoryState | None:
        """Go forward again along the branch; None when there is nothing to redo."""
        with self._db.write(story_id) as db:
            state, row = _head(db, story_id)
            target = _redo_target(db, story_id, row.seq)
            if target is None:
                return None
            return _append_move(db, story_id, state.version + 1, "redo", target)

    def can_undo(self, story_id: str) -> bool:
        with self._db.read(story_id) as db:
            return _head(db, story_id)[1].parent is not None

    def can_redo(self, story_id: str) -> bool:
        with self._db.read(story_id) as db:
            return _redo_target(db, story_id, _head(db, story_id)[1].seq) is not None

    def history(self, story_id: str) -> list[StoryState]:
        """Every version, oldest first: the state current after each log row."""
        with self._db.read(story_id) as db:
            _story(db, story_id)
            rows = _rows(db, story_id)
        states = {r.seq: r for r in rows if r.text is not None}
        return [_state(story_id, r, states[r.state]) for r in rows]

    def timeline(self, story_id: str) -> Timeline:
        """The branch undo and redo walk, and where the story stands on it."""
        with self._db.read(story_id) as db:
            return _timeline(db, story_id)

    # -- what goes with a story ---------------------------------------------------------
    def save_settings(self, story_id: str, settings: Mapping[str, Any]) -> None:
        """Replace the story's search settings (a JSON-able mapping)."""
        if not isinstance(settings, Mapping):
            raise InvalidInput(f"settings must be a mapping, not {type(settings).__name__}")
        self._set(story_id, "settings", _json(dict(settings), "the settings"))

    def load_settings(self, story_id: str) -> dict:
        """The story's last settings; {} when none were saved."""
        with self._db.read(story_id) as db:
            return _settings(_story(db, story_id))

    def save_tree(self, story_id: str, tree: Mapping[str, Any] | None) -> None:
        """Replace the story's last search tree (a JSON-able mapping); None forgets it."""
        if tree is not None and not isinstance(tree, Mapping):
            raise InvalidInput(f"a tree must be a mapping, not {type(tree).__name__}")
        self._set(story_id, "tree", None if tree is None else _json(dict(tree), "the tree"))

    def load_tree(self, story_id: str) -> dict | None:
        with self._db.read(story_id) as db:
            return _tree(_story(db, story_id))

    # -- export and import --------------------------------------------------------------
    def export_text(self, story_id: str) -> str:
        """The current text, exactly (it may hold lone surrogates: encode with care)."""
        return self.get(story_id).text

    def export_markdown(self, story_id: str) -> str:
        """The current text under its title as a heading; the text is left as written."""
        with self._db.read(story_id) as db:
            title = _infos(db, story_id=story_id)[0].title
            text = _head(db, story_id)[0].text
        heading = " ".join(title.split())
        body = text if text.endswith("\n") else text + "\n"
        return f"# {heading}\n\n{body}" if heading else body

    def export_json(self, story_id: str) -> str:
        """The whole story as JSON: its log, title, settings and tree.

        `import_json` of it, exported again, gives the same JSON but for "id",
        "updated_at" and "exported_at". ASCII only (lone surrogates escaped).
        """
        with self._db.read(story_id) as db:
            return _export_document(story_id, _story(db, story_id), _rows(db, story_id))

    def import_json(self, data: str | bytes) -> str:
        """A new story from `export_json`'s output; returns its id. Raises `BadImport`.

        The log is copied as it was (kinds, times, branches); the story gets a new id.
        """
        story = _parse_export(data)
        story_id = uuid.uuid4().hex[:12]
        with self._db.write(story_id) as db:
            db.execute(
                "INSERT INTO stories (id, title, created, updated, settings, tree) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (story_id, story["title"], story["created_at"], time.time(),
                 story["settings"], story["tree"]),
            )  # fmt: skip
            for row in story["rows"]:
                _insert(db, story_id, row)
        return story_id

    # -- writing ------------------------------------------------------------------------
    def _write_state(
        self,
        story_id: str,
        text: str,
        token_ids: Sequence[int] | None,
        model: str | None,
        kind: str,
        *,
        dedupe: bool,
    ) -> StoryState:
        new = _state_row(0, kind, None, time.time(), text, token_ids, model)
        with self._db.write(story_id) as db:
            current, row = _head(db, story_id)
            same = (new.text, new.token_ids, new.model) == (row.text, row.token_ids, row.model)
            if dedupe and same:
                return current
            seq = current.version + 1
            new = replace(new, seq=seq, state=seq, parent=row.seq)
            _insert(db, story_id, new)
            return _state(story_id, new, new)

    def _move_to(self, story_id: str, position: int) -> None:
        """Make state `position` of the timeline current (one undo or redo row)."""
        with self._db.write(story_id) as db:
            timeline = _timeline(db, story_id)
            if type(position) is not int or not 0 <= position < len(timeline.states):
                raise InvalidInput(f"story {story_id} has no state {position}")
            if position != timeline.position:
                kind = "undo" if position < timeline.position else "redo"
                version = _head(db, story_id)[0].version + 1
                _append_move(db, story_id, version, kind, timeline.states[position].version)

    def _set(self, story_id: str, column: str, value: str | None) -> None:
        with self._db.write(story_id) as db:
            _story(db, story_id)
            db.execute(f"UPDATE stories SET {column} = ? WHERE id = ?", (value, story_id))
