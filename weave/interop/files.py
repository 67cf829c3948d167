"""A loom file into the store and out of it: `import_file` reads a file (LLooM's or another
tool's, `weave.interop.detect`) into a saved story, checks the steering and bans its
settings keep (`weave.story`), and has the store insert it; `export_json` and
`export_openloom` write what the store returns (`LoomStore.saved`). The store itself reads
no file format and checks no settings: it keeps what it is given.
"""

from __future__ import annotations

from weave.interop import openloom
from weave.interop.detect import read_loom_file
from weave.interop.foreign import Imported
from weave.loom.formats import loom_document
from weave.loom.store import LoomStore
from weave.loom.store_errors import BadImport
from weave.story.bans import bans_in
from weave.story.steering import steering_in


def import_file(
    store: LoomStore, data: str | bytes, name: str = "the file", *, format: str | None = None
) -> tuple[str, Imported]:
    """A new story in `store` from a loom file in `format` (None: detected): its id, and
    what was read (the format found, what was kept aside).

    Raises `BadImport` naming the file (`name`) and what is wrong with it, or that
    reading it needs more memory than the process may have (a file within `MAX_BYTES`
    takes some ten times its size while it is read); the store's own `StoreError`s.
    """
    try:
        try:
            imported = read_loom_file(data, format)
            steering_in(imported.story.settings)  # memory, note, lorebook: names the field
            bans_in(imported.story.settings)  # likewise for the bans
        except ValueError as e:
            raise BadImport(f"{name} cannot be imported: {e}") from e
        return store.insert(imported.story), imported
    except MemoryError:
        size = f"{len(data) / (1 << 20):,.0f} MiB"
        raise BadImport(f"{name} cannot be imported: reading it ({size}) needs more memory "
                        "than this process may have") from None  # fmt: skip


def export_json(store: LoomStore, story_id: str) -> str:
    """The whole story as "lloom-loom" JSON; `import_file` of it gives it back."""
    return loom_document(story_id, store.saved(story_id))


def export_openloom(store: LoomStore, story_id: str) -> str:
    """The whole story as Open Loom v2 JSON; `import_file` of it gives it back."""
    return openloom.document(story_id, store.saved(story_id))
