"""The sidebar's search box: find a branch again, in this story or any of the writer's,
and jump there.

What is typed is looked for in every node of the writer's stories (`LoomStore.find`,
`weave.loom.find`: case ignored, across the nodes of a path, the open story's matches first);
each match is a button showing the story's text around it (and the story's title when it
is another story), and a click goes to the node where the match ends: `Workspace.go`
in the open story, `Workspace.open` for another. The store keeps to the writer's own
stories. This module draws and calls; it owns no state beyond the box's text.
"""

from __future__ import annotations

import streamlit as st

from weave.desk.session import Workspace
from weave.loom.find import Found
from weave.loom.store import StoreError
from weave.view import present
from weave.view.present import md

SHOWN = 8  # matches listed in the sidebar; more: type more words
LABEL_CHARS = 60


def find_ui(ws: Workspace) -> None:
    """The box and, once it holds text, the matches as buttons."""
    query = st.text_input("🔎 Find a branch", key="find_text", placeholder="words you wrote",
                          help="Finds text in every node of your stories (case ignored) "
                          "and jumps there")  # fmt: skip
    if not query.strip():
        return
    try:
        found = ws.store.find(query, first=ws.story_id if ws.started else None, limit=SHOWN + 1)
    except StoreError as e:
        st.error(f"**Cannot search the stories.** {md(str(e))}", icon="🔎")
        return
    if not found:
        st.caption(f"Nothing found for “{md(query)}”.")
        return
    for i, match in enumerate(found[:SHOWN]):
        here = ws.started and match.story_id == ws.story_id and match.node_id == ws.cursor
        st.button(label(ws, match), key=f"found_{i}", on_click=jump, args=(ws, match),
                  disabled=here, width="stretch")  # fmt: skip
    if len(found) > SHOWN:
        st.caption(f"The first {SHOWN}: type more words to narrow it.")


def label(ws: Workspace, match: Found) -> str:
    """The match in bold within the text around it, and the story's title when another."""
    room = max(10, (LABEL_CHARS - len(match.match)) // 2)
    found = present.one_line(match.match)  # in bold: markdown's ** holds no edge space
    lead = match.match[: len(match.match) - len(match.match.lstrip())]
    trail = match.match[len(match.match.rstrip()) :]
    before = present.spaced(match.before + lead)[-room:]  # the spaces between pieces kept
    after = present.spaced(trail + match.after)[:room]
    text = f"…{md(before)}**{md(found)}**{md(after)}…"
    other = not ws.started or match.story_id != ws.story_id
    return f"{text} · 📖 {md(present.shorten(match.title, 30))}" if other else text


def jump(ws: Workspace, match: Found) -> None:
    """Go to the match's node: in the open story, or opening its story."""
    if ws.started and match.story_id == ws.story_id:
        ws.go(match.node_id)
    else:
        ws.open(match.story_id, match.node_id)
