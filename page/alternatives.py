"""The Alternatives dialog: the story's last tokens shaded by their probability, the
model's alternatives at the one clicked (the last at first) as a row of buttons, and
branching the loom at a click on one. A click on a token reaches the page through a hidden
box (static/token_click.html posts its position there: the dialog redraws, nothing
reloads). Widgets only: the alternatives are `Offers.alternatives`'
(`weave.desk.alternatives`), the branch `Workspace.edit`'s."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from backends import Backend
from page import bans
from page.state import tab
from weave.desk import session
from weave.desk.alternatives import Alternatives, Choice, branch_text
from weave.view import present
from weave.view.present import md

ALTERNATIVE_TOKENS = 256  # the story's last tokens offered for alternatives
ALTERNATIVES_K = 8  # alternatives per token
ALT_PICK = "alt_pick"  # the hidden box a click on a token posts its position to
TOKEN_CLICK = Path(__file__).resolve().parent / "static" / "token_click.html"


def open_alternatives() -> None:
    tab().alternatives_open = True


def close_alternatives() -> None:
    tab().alternatives_open = False


@st.dialog("🔍 Alternatives at any token", width="large", on_dismiss=close_alternatives)
def alternatives_dialog(ws: session.Workspace, backend: Backend) -> None:
    """The story's last tokens shaded by their probability; click one, then one of the
    model's alternatives there, and the loom branches at that token (the dialog closes)."""
    if not tab().alternatives_open:
        st.rerun()  # branched: the whole page, on the new branch
    shown = tab().alternatives
    if shown is None or (shown.story_id, shown.node_id) != (ws.story_id, ws.cursor):
        with st.spinner("Reading the story's tokens…"):
            shown = ws.offers.alternatives(backend, ws.spot, k=ALTERNATIVES_K,
                                           last=ALTERNATIVE_TOKENS)  # fmt: skip
        tab().alternatives, tab().alternative_words = shown, {}
    if shown.unsupported:
        st.info(f"{md(backend.name)} cannot say what the model offered at the story's own "
                "tokens (its server gives no log-probabilities of a prompt).")  # fmt: skip
        return
    if shown.error is not None:
        st.error(f"**No alternatives here.** {md(shown.error)}", icon="🔌")
        return
    if not shown.rows:
        st.info("The story is too short here: no token of it has alternatives.")
        return
    alternatives_picker(ws, backend, shown)


def alternatives_picker(ws: session.Workspace, backend: Backend, shown: Alternatives) -> None:
    """The story's last tokens, the one picked outlined (a click picks another), then the
    model's alternatives there, each read on to its word's end, each a button that
    branches the loom with it."""
    box = st.session_state.get(ALT_PICK, "")
    row = shown.row_at(int(box) if box.isdigit() else None)
    words = tab().alternative_words
    if row.position not in words:
        words[row.position] = ws.offers.choices(backend, ws.spot, row)
    st.markdown(present.story_tokens_html(shown.rows, box=ALT_PICK, picked=row.position),
                unsafe_allow_html=True)  # fmt: skip
    st.text_input("Token picked", key=ALT_PICK, label_visibility="collapsed")
    st.html(TOKEN_CLICK.read_text(), unsafe_allow_javascript=True)
    st.caption("Shaded by the probability the model gave each token (hover for it). Click a "
               "word for the model's alternatives there; click one to branch with it.")  # fmt: skip
    st.markdown(f"At “{md(present.token_word(row.text))}” "
                f"({present.token_probability(row)}) the model offered:")  # fmt: skip
    banned = bans.banned_alternatives(ws, list(shown.rows), shown.rows.index(row))
    with st.container(horizontal=True, gap="small"):
        for i, choice in enumerate(words[row.position]):
            own = choice.token_id == row.token_id
            label = ("🚫 " if i in banned else "") + present.alternative_label(choice)
            st.button(label, key=f"alt_{row.position}_{i}", disabled=own,
                      help=choice_help(banned.get(i), own), on_click=branch_at,
                      args=(ws, shown, row, choice))  # fmt: skip


def choice_help(banned: str | None, own: bool) -> str:
    if own:
        return "The story's own token here"
    said = "A new branch: the story up to this token, then this one"
    return said if banned is None else f"{said} (the bans would prune it: {banned})"


def branch_at(ws: session.Workspace, shown: Alternatives, row, choice: Choice) -> None:
    try:
        ws.edit(branch_text(ws.text, shown.rows, row, choice), how="alternative")
        close_alternatives()
    except ValueError as e:  # the tokens do not spell this story's end
        tab().alternatives = shown.failed(str(e))
