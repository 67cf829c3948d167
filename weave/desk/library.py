"""A tab's view of the story store: the stories it lists, renames, deletes, restores,
purges, imports and exports, and what failed last.

Every store action a tab runs goes through `Library.save`, so that a failure (a locked
or full disk, a damaged entry) is kept in `save_error` for the page to show, never
raised. The moves within a story are `weave.desk.session`'s; the rows are `weave.loom.store`'s;
a file read or written `weave.interop.files`'.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from weave.interop.files import export_json, export_openloom, import_file
from weave.loom.formats import without_surrogates
from weave.loom.store import LoomStore, StoreError, StoryInfo
from weave.loom.store_sql import is_database_url
from weave.search.codec import unshowable_import


def open_store(where: str | os.PathLike[str]) -> tuple[LoomStore, str | None]:
    """The store the settings name; where a data folder cannot open, one in a temporary
    folder and why. A database server that cannot be used raises its `StoreError`: a
    group's stories are never kept where the others cannot see them."""
    try:
        return LoomStore(where), None
    except StoreError as e:
        if is_database_url(where):
            raise
        return LoomStore(tempfile.mkdtemp(prefix="lloom-unsaved-")), str(e)


class Library:
    """The stories of `store`, as one tab changes them; `save_error` says what failed last."""

    def __init__(self, store: LoomStore) -> None:
        self.store = store
        self.save_error: str | None = None
        self.failed_reading = False  # `save_error` is a read's: nothing was left unsaved

    def save(self, action: Callable[[], Any], *, reading: bool = False) -> Any:
        """Run a store action (`reading`: one that changes nothing); a failure is kept in
        `save_error` (and None returned), never raised. One that works clears it."""
        try:
            value = action()
        except StoreError as e:
            self.failed(e, reading=reading)
            return None
        self.save_error, self.failed_reading = None, False
        return value

    def failed(self, error: Exception, *, reading: bool) -> None:
        self.save_error, self.failed_reading = str(error), reading

    def stories(self, *, deleted: bool = False) -> list[StoryInfo]:
        return self.save(lambda: self.store.stories(deleted=deleted), reading=True) or []

    def ids_starting(self, prefix: str) -> list[str]:
        """The ids of the writer's stories (not deleted) that begin with `prefix`: a URL
        whose story id was cut short still names the one story it begins."""
        return [info.id for info in self.stories() if info.id.startswith(prefix)]

    def title(self, story_id: str) -> str:
        return self.save(lambda: self.store.info(story_id).title, reading=True) or ""

    def rename(self, story_id: str, title: str) -> str:
        """Give a story a title (a blank one: its first words); returns the title it has."""
        title = without_surrogates(title)
        self.save(lambda: self.store.rename(story_id, title))
        return self.title(story_id) or title

    def delete(self, story_id: str) -> None:
        """Move a story to the deleted ones (recoverable until purged)."""
        self.save(lambda: self.store.delete(story_id))

    def restore(self, story_id: str) -> None:
        self.save(lambda: self.store.restore(story_id))

    def purge(self, story_id: str) -> None:
        """Remove a deleted story for good."""
        self.save(lambda: self.store.purge(story_id))

    def import_file(self, data: bytes | str) -> tuple[str | None, str | None]:
        """Store a loom file (LLooM's, or another loom tool's: `weave.interop`) as a new
        story: (its id, what to say once it is open: another tool's format and what was
        kept aside, or the file's suggestions left out), or (None, what is wrong with the
        file or the store)."""
        try:
            story_id, imported = import_file(self.store, data)
        except ValueError as e:  # the file's fault (InvalidInput is also a StoreError)
            return None, str(e)
        except StoreError as e:
            self.failed(e, reading=False)
            return None, str(e)
        said = None if imported.format == "LLooM" else imported.message()
        return story_id, said or unshowable_import(data)

    def export(self, story_id: str) -> str:
        """The whole story, every branch, as the loom JSON (`import_file` reads it back)."""
        return export_json(self.store, story_id)

    def export_openloom(self, story_id: str) -> str:
        """The whole story as Open Loom v2 (`import_file` reads it back)."""
        return export_openloom(self.store, story_id)
