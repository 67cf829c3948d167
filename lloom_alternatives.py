"""The Alternatives dialog: the story's last tokens shaded by their probability, the
model's alternatives at the one picked, and branching the loom there. Widgets only: the
alternatives are `Offers.alternatives`' (`weave.desk.alternatives`), the branch
`Workspace.edit`'s."""

from __future__ import annotations

import streamlit as st

import lloom_bans
from backends import Backend
from lloom_state import page
from weave.desk import session
from weave.desk.alternatives import Alternatives, branch_text
from weave.view import present
from weave.view.present import md

ALTERNATIVE_TOKENS = 256  # the story's last tokens offered for alternatives
ALTERNATIVES_K = 8  # alternatives per token


def open_alternatives() -> None:
    page().alternatives_open = True


def close_alternatives() -> None:
    page().alternatives_open = False


@st.dialog("🔍 Alternatives at any token", width="large", on_dismiss=close_alternatives)
def alternatives_dialog(ws: session.Workspace, backend: Backend) -> None:
    """The story's last tokens shaded by their probability; pick one, then one of the
    model's alternatives there, and the loom branches at that token (the dialog closes)."""
    if not page().alternatives_open:
        st.rerun()  # branched: the whole page, on the new branch
    shown = page().alternatives
    if shown is None or (shown.story_id, shown.node_id) != (ws.story_id, ws.cursor):
        with st.spinner("Reading the story's tokens…"):
            shown = ws.offers.alternatives(backend, ws.spot, k=ALTERNATIVES_K,
                                           last=ALTERNATIVE_TOKENS)  # fmt: skip
        page().alternatives = shown
    if shown.unsupported:
        st.info(f"{md(backend.name)} cannot say what the model offered at the story's own "
                "tokens (its server gives no log-probabilities of a prompt).")  # fmt: skip
        return
    if shown.error is not None:
        st.error(f"**No alternatives here.** {md(shown.error)}", icon="🔌")
        return
    alternatives_picker(ws, shown)


def alternatives_picker(ws: session.Workspace, shown: Alternatives) -> None:
    rows = shown.rows
    st.markdown(present.story_tokens_html(rows), unsafe_allow_html=True)
    st.caption("Shaded by the probability the model gave each token (hover for it and the "
               "likeliest alternatives).")  # fmt: skip
    token, choice, go = st.columns([3, 3, 2], vertical_alignment="bottom")
    at = token.selectbox("Token", range(len(rows)), index=len(rows) - 1, key="alt_token",
                         format_func=lambda i: token_label(rows[i], i))  # fmt: skip
    row = rows[at]
    banned = lloom_bans.banned_alternatives(ws, rows, at)  # marked, still offered
    pick = choice.selectbox(
        "Alternative",
        range(len(row.top)),
        key=f"alt_choice_{at}",
        format_func=lambda i: (
            ("🚫 " if i in banned else "") + present.alternative_label(row.top[i])
        ),
    )
    go.button("Branch here", key="alt_branch", type="primary", on_click=branch_at,
              args=(ws, shown, row, row.top[pick]),
              help="A new branch: the story up to this token, then the alternative")  # fmt: skip


def token_label(row, i: int) -> str:
    return f"{i + 1}. {present.editable_text(row.text) or '∅'}"


def branch_at(ws: session.Workspace, shown: Alternatives, row, choice) -> None:
    try:
        ws.edit(branch_text(ws.text, shown.rows, row, choice), how="alternative")
        close_alternatives()
    except ValueError as e:  # the tokens do not spell this story's end
        page().alternatives = shown.failed(str(e))
