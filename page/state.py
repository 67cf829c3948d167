"""What the page keeps for one browser session besides its widgets' values: `PageState`,
and `tab()` to reach it from any of the page's modules (`lloom`, `page.library`,
`page.alternatives`, `page.group`). Made once per session by `lloom.workspace`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import streamlit as st

from weave.desk import session
from weave.desk.alternatives import Alternatives, Choice
from weave.desk.partial import Offered

if TYPE_CHECKING:
    from page.group import Live

T = TypeVar("T")


@dataclass
class Panel:
    """What a panel of the story's saved values (its bans, its steering) keeps besides
    its widgets' values."""

    seen: object = None  # the value this tab's widgets hold; another (another tab's, or
    # another story's) names the widgets anew (`rev`), so that they show it
    rev: int = 0  # the widgets' generation: new after the value changed elsewhere, or an
    # import, an added or a deleted entry changed it under them
    import_error: str | None = None  # why the last file could not be imported

    def uploaded(self, key: str, read: Callable[[bytes], T]) -> T | None:
        """The file the uploader `key` was just given, `read`; None when there is none, or
        when it cannot be read (`import_error` then says why, with the file's name)."""
        upload = st.session_state.get(key)
        if upload is None:
            return None
        try:
            value = read(upload.getvalue())
        except ValueError as e:
            self.import_error = f"{upload.name}: {e}"
            return None
        self.import_error = None
        return value


@dataclass
class PageState:
    """What the page keeps for one browser session besides its widgets' values."""

    ws: session.Workspace
    url_read: bool = False  # the URL's story and node were opened (once per session)
    url_missing: tuple[str, int] | None = None  # a story the URL named that is not here,
    # and how many of the writer's stories begin with what it named (said once)
    backend_error: str | None = None  # why the backend cannot be used (until retried)
    confirm_delete: str | None = None  # the story whose deletion awaits a yes
    confirm_purge: str | None = None
    settings_for: tuple | None = None  # (story, model's defaults) the sliders were set for
    story_shown: tuple[str, str, str] | None = None  # (story, node, text) in the story box
    title_shown: tuple[str, str] | None = None  # (story, title) in the sidebar's title box
    alternatives: Alternatives | None = None  # the last alternatives asked for
    alternative_words: dict[int, tuple[Choice, ...]] = field(default_factory=dict)  # by
    # row position: the choices there, each read on to its word's end (`Offers.choices`)
    alternatives_open: bool = False  # the Alternatives dialog is open
    imports: int = 0  # files imported (each import gets a fresh uploader)
    import_error: str | None = None  # why the last file could not be imported: said once
    imported: str | None = None  # the title of the story the last import opened: said once
    switch_to: str | None = None  # the model picked, to load in this run
    switch_error: str | None = None  # why the model picked last could not be loaded
    all_rows: bool = False  # every suggestion listed, not the first LISTED
    sample_next: bool = False  # draw samples in this run: what 🔁 Again offered was taken
    editing_row: str | None = None  # the offered row shown as a box (`page.rows`)
    rest: Offered | None = None  # the rest of the row last taken in part (`page.part`)
    live: Live | None = None  # a shared story's growth, as this tab knows it (`page.group`)
    bans: Panel = field(default_factory=Panel)  # the bans panel's (`page.bans`)
    steering: Panel = field(default_factory=Panel)  # the steering panel's


def tab() -> PageState:
    """This browser session's state (`workspace` makes it)."""
    return st.session_state.page
