"""Taking part of a row: a suggestion taken up to a word, the rest offered after it.

A suggestion's row is drawn word by word (`present.Words`); hovering a word marks what a
click takes (the page's CSS: the words up to it underlined, the rest faded), and a click
posts the row and the word's end to one hidden box (static/token_click.html, the
mechanism the Alternatives dialog's tokens use: nothing reloads). W (`keys.WORD`, the
✂ Word button) takes the first row up to its first word. The part is taken as ➜ Take
takes a row (`weave.desk.take.take`: after an edit in the same click too), as a "partial
suggestion" with its ids where the cut falls on a token boundary (`weave.desk.partial`).

The rest of the row stays offered: at the node the part made, drawn first above that
node's suggestions as a row of its own (↳), taken whole (➜), kept (📌), edited (✏️) or
again up to a word, so a writer walks a row word by word; a lone suggestion is not
taken by itself there (the writer stopped there on purpose). Where the node's search
offers it already (a row reads the same, or goes on from it), that row is it. The tab
keeps the last rest only (`PageState.rest`); the whole row is also where it was, in the
parent node's kept search (↩ Undo).
"""

from __future__ import annotations

import streamlit as st

from page.alternatives import TOKEN_CLICK
from page.rows import Row, offer_row
from page.state import tab
from weave import keys
from weave.desk import session
from weave.desk.partial import Offered, beside, word_ends
from weave.desk.take import take
from weave.search.tree import Suggestion
from weave.view import present

TAKE_PICK = "take_pick"  # the hidden box a click on a row's word posts `row@end` to
REST_FIGURE = ('<span class="share rest" title="The rest of the row you took part of">'
               "↳</span>")  # fmt: skip


def words(row_key: str, text: str) -> present.Words:
    """A row's words as click targets posting to the hidden box."""
    return present.Words(TAKE_PICK, row_key, word_ends(text))


def rest_here(ws: session.Workspace, suggestions: list[Suggestion]) -> Offered | None:
    """The rest of the row last taken in part, where it is offered (at the cursor), unless
    one of the node's `suggestions` holds it (`weave.desk.partial.beside`)."""
    rest = tab().rest
    return beside(rest, suggestions) if rest and rest.piece.node_id == ws.cursor else None


def rest_row(ws: session.Workspace, rest: Offered, prefix_space: bool, shading: bool) -> str:
    """The rest's row (↳, its words clickable, ✏️ 📌 ➜ without keys); returns its key."""
    key = f"rest_{abs(hash((rest.piece.node_id, rest.piece.text, prefix_space))):x}"
    html = present.suggestion_html(rest.suggestion, prefix_space=prefix_space, shading=shading,
                                   words=words(key, rest.suggestion.text))  # fmt: skip
    offer_row(Row(ws, rest.piece, key, prefix_space), html, REST_FIGURE)
    return key


def word_ui(ws: session.Workspace, first: Offered | None, prefix_space: bool) -> None:
    """✂ Word (W): the first row up to its first word."""
    st.button("✂ Word", key="take_word", shortcut=keys.WORD.shortcut, disabled=first is None,
              on_click=take_first_word, args=(ws, first, prefix_space),
              help="Take the first row up to its first word; the rest stays offered")  # fmt: skip


def pick_ui(ws: session.Workspace, rows: dict[str, Offered], prefix_space: bool) -> None:
    """The hidden box a click on a word of `rows` (by key) posts to, and the script."""
    st.text_input("Word picked", key=TAKE_PICK, on_change=take_word, label_visibility="collapsed",
                  args=(ws, rows, prefix_space))  # fmt: skip
    st.html(TOKEN_CLICK.read_text(), unsafe_allow_javascript=True)


def take_word(ws: session.Workspace, rows: dict[str, Offered], prefix_space: bool) -> None:
    """A click on a word: its row up to the word's end (a row no longer shown: nothing)."""
    picked, st.session_state[TAKE_PICK] = st.session_state[TAKE_PICK], ""  # the next click too
    key, _, end = picked.rpartition("@")
    offered = rows.get(key)
    if offered is not None and end.isdigit() and 0 < int(end) <= len(offered.piece.text):
        take_up_to(ws, offered, int(end), prefix_space)


def take_first_word(ws: session.Workspace, first: Offered, prefix_space: bool) -> None:
    take_up_to(ws, first, word_ends(first.suggestion.text)[0], prefix_space)


def take_up_to(ws: session.Workspace, offered: Offered, end: int, prefix_space: bool) -> None:
    """Take `offered` up to `end` as ➜ Take takes a row; where the story moved on to the
    part, the rest is offered there and no lone suggestion is taken over it."""
    tab().editing_row = None
    part, start = offered.up_to(end), ws.cursor
    take(ws, part, None, prefix_space=prefix_space)
    if ws.cursor == start or ws.loom.node(ws.cursor).text != part.text:
        return
    tab().rest = offered.after(end, ws.cursor)
    if tab().rest is not None:
        ws.lone = ws.lone.held()
