"""The offered rows: one suggestion or one 🎲 sample per full-width row, drawn alike: its
figure (a share over its bar), its text (wrapping, never cut), ✏️ Edit, 📌 Keep and ➜ Take.
✏️ turns that row alone into a box in its place, Enter takes what it holds (a form: Enter
submits, leaving the box does not). What a row's buttons do is the workspace's
(`Workspace.keep`, and `weave.desk.take.take`); which rows to list and in what order is the
caller's (`page.suggestions.suggestions_ui`, `page.sampling.samples_ui`).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from page.state import tab
from weave import keys
from weave.desk import session
from weave.desk.spot import Piece
from weave.desk.take import take
from weave.view import present

ACCEPT = "➜"  # the accept arrow: a glyph DejaVu has (no emoji font needed)


@dataclass(frozen=True)
class Row:
    """One offered continuation on the page: where it came from, and its widgets' key."""

    ws: session.Workspace
    piece: Piece
    key: str
    prefix_space: bool

    def shown(self) -> str | None:
        """The text as the writer left it in the row's box (None: unedited)."""
        box = st.session_state.get(self.key)
        return None if box is None else present.typed_text(box)


def offer_row(row: Row, text_html: str, figure_html: str, rank: int | None = None) -> None:
    """One row: `figure_html` (a `<span class="share">`) before `text_html`, or the row's
    box while ✏️ Edit is on for it; then ✏️, 📌 Keep and ➜ Take (the n-th suggestion's keys
    when `rank` is given). No tooltips on the buttons: each costs the browser a second copy
    of its button."""
    if tab().editing_row == row.key:
        edit_row(row, figure_html, rank)
        return
    line = st.container(horizontal=True, gap="xsmall", vertical_alignment="center")
    with line:
        st.markdown(f"{text_html}{figure_html}", unsafe_allow_html=True, width="stretch")
        line.button("✏️ Edit", key=f"{row.key}_edit", on_click=edit, args=(row.key,), width=84)
        take_buttons(row, line, line, rank)


def edit_row(row: Row, figure_html: str, rank: int | None) -> None:
    """The row as a box holding its text (whitespace marked), Enter to take it; ✕ Close
    leaves it unchanged."""
    shown = present.shown_text(row.piece.text, prefix_space=row.prefix_space)
    take_key, hold = row_keys(rank)
    form = st.form(f"{row.key}_form", border=False, enter_to_submit=True)
    with form, st.container(horizontal=True, gap="xsmall", vertical_alignment="center"):
        st.markdown(figure_html, unsafe_allow_html=True, width="content")
        st.text_input("Edit", value=present.editable_text(shown), key=row.key,
                      label_visibility="collapsed", width="stretch",
                      help="↵ a new line, ␣ a space at the start; Enter takes it")  # fmt: skip
        # Enter clicks a form's first button: ➜ Take comes first here
        st.form_submit_button(f"{ACCEPT} Take", key=f"{row.key}_go", width=96,
                              on_click=accept_row, args=(row,), shortcut=take_key)  # fmt: skip
        st.form_submit_button("📌 Keep", key=f"{row.key}_keep", width=136, on_click=keep_row,
                              args=(row,), shortcut=hold)  # fmt: skip
        st.form_submit_button("✕ Close", key=f"{row.key}_close", on_click=edit, args=(None,),
                              width=96)  # fmt: skip


def edit(key: str | None) -> None:
    tab().editing_row = key


def take_buttons(row: Row, keep, go, rank: int | None = None) -> None:
    """📌 Keep as a branch (disabled once kept), ➜ Take; the n-th suggestion's keys."""
    kept = row.ws.loom.child_with_text(row.piece.node_id, row.piece.text) is not None
    take_key, hold = row_keys(rank)
    keep.button("📌 Keep", key=f"{row.key}_keep", width=136, on_click=keep_row, args=(row,),
                disabled=kept, shortcut=hold)  # fmt: skip
    go.button(f"{ACCEPT} Take", key=f"{row.key}_go", width=96, on_click=accept_row,
              args=(row,), shortcut=take_key)  # fmt: skip


def row_keys(rank: int | None) -> tuple[str | None, str | None]:
    """The n-th suggestion's keys (➜ Take, 📌 Keep); a sample's row has none."""
    return (keys.accept_key(rank), keys.keep_key(rank)) if rank is not None else (None, None)


def accept_row(row: Row) -> None:
    """Without prefix space the box holds the whole text, its leading space included; after
    an edit in the same click, `weave.desk.take` decides."""
    tab().editing_row = None
    take(row.ws, row.piece, row.shown(), prefix_space=row.prefix_space)


def keep_row(row: Row) -> None:
    """📌 Keep, said where the writer is looking (the greyed button alone said nothing)."""
    tab().editing_row = None
    before = len(row.ws.loom.nodes)
    row.ws.keep(row.piece, row.shown(), prefix_space=row.prefix_space)
    if len(row.ws.loom.nodes) > before:
        text = present.shorten(present.one_line(row.shown() or row.piece.text), 40)
        st.toast(f"Kept as a branch here: “{present.md(text)}”. It waits in the story tree "
                 "and Go to; you stay where you are.", icon="📌")  # fmt: skip
