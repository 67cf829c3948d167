"""`Store`: the story store as the `weave.session.Book` that the page's workspace saves into.

This module owns the translation between the session's book (`Change`, `Saved`, `Entry`,
kind "start") and `StoryStore`. What a book is and when it is written is
`weave.session`'s; how stories are kept is `weave.store.story_store`'s.
"""

from __future__ import annotations

import os

from weave.session import Change, Entry, Saved
from weave.store.errors import StoryNotFound
from weave.store.log import _infos, _settings, _story, _timeline, _tree
from weave.store.story_store import StoryStore
from weave.store.values import SAVE_KINDS


class Store:
    """`StoryStore` as the `weave.session.Book` that `Workspace` saves into.

    A book records every change it is given, even one equal to the current state, so that
    its positions stay those of the workspace's history; "start" is the store's "create".
    """

    def __init__(self, folder: str | os.PathLike[str]):
        self.store = StoryStore(folder)
        self.path = self.store.path
        self.location = str(self.store.folder)

    def create(self, text: str, *, kind: str = "start", title: str | None = None) -> str:
        return self.store.create(text, title=title, kind="import" if kind == "import" else "create")

    def record(self, story_id: str, text: str, kind: str) -> None:
        kind = kind if kind in SAVE_KINDS else "edit"
        self.store._write_state(story_id, text, None, None, kind, dedupe=False)

    def move(self, story_id: str, position: int) -> None:
        self.store._move_to(story_id, position)

    def load(self, story_id: str) -> Saved | None:
        try:
            with self.store._db.read(story_id) as db:
                story = _story(db, story_id)
                title = _infos(db, story_id=story_id)[0].title
                timeline = _timeline(db, story_id)
                settings, tree = _settings(story), _tree(story)
        except StoryNotFound:
            return None
        history = tuple(
            Change(s.text, "start" if s.kind == "create" else s.kind, s.token_ids)
            for s in timeline.states
        )
        return Saved(story_id, title, history, timeline.position, settings, tree)

    def stories(self, *, deleted: bool = False) -> list[Entry]:
        infos = self.store.list_stories(include_deleted=True)
        return [
            Entry(i.id, i.title, i.updated_at, i.deleted) for i in infos if i.deleted == deleted
        ]

    def rename(self, story_id: str, title: str) -> None:
        self.store.rename(story_id, title)

    def delete(self, story_id: str) -> None:
        self.store.delete(story_id)

    def restore(self, story_id: str) -> None:
        self.store.restore(story_id)

    def purge(self, story_id: str) -> None:
        self.store.purge(story_id)

    def save_settings(self, story_id: str, settings: dict) -> None:
        self.store.save_settings(story_id, settings)

    def save_search(self, story_id: str, search: dict) -> None:
        self.store.save_tree(story_id, search)
