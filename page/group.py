"""A writing group on the page: the open story's sharing (its owner shares it by verified
address, to read or to co-write; whoever it was shared with is told by whom), and, on a
shared story, the branches other writers add, shown as they come, marked with who made
them.

`live_ui` is a fragment rerun every LIVE_EVERY_S by itself: it asks the store how many
nodes the story has (`LoomStore.watch`: on PostgreSQL what the server's notifications
said, so any page process's branch shows; on SQLite a count) and reads the story only
when it grew. It draws only its own lines, so the story box and the rows are never
redrawn under the writer's typing; a branch shown there is a click away (Go). Widgets
only: who may do what is the store's, a tab's moves `weave.desk.session.Workspace`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from page.state import tab
from weave.access import writer_for
from weave.desk import session
from weave.loom.loom import Node
from weave.loom.store import StoreError
from weave.loom.store_sql import LOCAL_WRITER
from weave.view.labels import ending
from weave.view.present import md

LIVE_EVERY_S = 0.5  # how often a shared story's page asks whether it grew: a branch shows
# within a second (issue 43), and asking costs PostgreSQL nothing (a notification read)
NEWS = 3  # other writers' newest branches listed at most
ROLES = {"co-writer": "co-writing", "reader": "to read"}


@dataclass
class Live:
    """What a tab knows of its shared story's growth: how to ask, how many nodes it had,
    and the other writers' branches not yet visited (newest first)."""

    story_id: str
    watch: Callable[[], int]  # `LoomStore.watch`'s: how many nodes the story has now
    known: int
    news: list[Node] = field(default_factory=list)


def share_ui(ws: session.Workspace) -> None:
    """In the sidebar: a story shared with this writer says by whom and how; a group's
    writer shares their own (no sharing for the machine's own writer: no login names them)."""
    if ws.role != "owner":
        info = ws.library.save(lambda: ws.store.info(ws.story_id), reading=True)
        owner = info.owner if info else "its owner"
        st.caption(f"👥 Shared with you by **{md(owner)}**, {ROLES[ws.role]}.")
        return
    if ws.store.writer == LOCAL_WRITER:
        return
    with st.expander("👥 Share this story"):
        key = f"share_{ws.story_id}"
        st.text_input("A writer's e-mail address", key=f"{key}_to",
                      help="The address their login's provider verified")  # fmt: skip
        st.radio("They may", ["co-write", "read"], key=f"{key}_how", horizontal=True)
        st.button("Share", key=f"{key}_go", on_click=share, args=(ws, key))
        for shared in ws.library.save(lambda: ws.store.shares(ws.story_id), reading=True) or []:
            who, stop = st.columns([4, 1], vertical_alignment="center")
            who.caption(f"{md(shared.email)}: {'co-writing' if shared.may_write else 'reading'}")
            stop.button("✖", key=f"{key}_stop_{shared.email}", help="Stop sharing with them",
                        on_click=unshare, args=(ws, shared.email))  # fmt: skip


def share(ws: session.Workspace, key: str) -> None:
    email = writer_for(st.session_state[f"{key}_to"])
    if email is None:
        st.toast("Write the e-mail address that names them at their login.", icon="👥")
        return
    may_write = st.session_state[f"{key}_how"] == "co-write"
    ws.library.save(lambda: ws.store.share(ws.story_id, email, may_write=may_write))
    st.session_state[f"{key}_to"] = ""


def unshare(ws: session.Workspace, email: str) -> None:
    ws.library.save(lambda: ws.store.unshare(ws.story_id, email))


def live_ui(ws: session.Workspace) -> None:
    """On a shared story (theirs shared with others, or another's shared with them), the
    branches other writers add, as they come; nothing on a story nobody shares."""
    if ws.role == "owner" and not ws.library.save(lambda: ws.store.shares(ws.story_id),
                                                  reading=True):  # fmt: skip
        return
    live = tab().live
    if live is None or live.story_id != ws.story_id:
        watch = ws.library.save(lambda: ws.store.watch(ws.story_id), reading=True)
        if watch is None:
            return
        tab().live = Live(ws.story_id, watch, len(ws.loom.nodes))
    news_ui(ws)


@st.fragment(run_every=LIVE_EVERY_S)
def news_ui(ws: session.Workspace) -> None:
    """Other writers' newest branches, each with who made it and a Go; redrawn by itself."""
    live = tab().live
    if live is None or live.story_id != ws.story_id or not ws.started:
        return
    try:
        grown = live.watch()
        if grown > live.known:
            stored = ws.store.load(ws.story_id)
            came = [n for n in stored.nodes.values() if n.id not in ws.loom.nodes]
            seen = {n.id for n in live.news}
            live.news = ([n for n in reversed(came) if n.id not in seen] + live.news)[:NEWS]
            live.known = grown
    except StoreError as e:  # said here, where the news would be; the story is untouched
        st.caption(f"👥 Co-writers' branches cannot be shown now: {md(str(e))}")
        return
    for node in live.news:
        who = node.provenance.writer if node.provenance and node.provenance.writer else None
        line, go = st.columns([5, 1], vertical_alignment="center")
        line.caption(f"✍️ **{md(who or 'Another tab')}** added “{md(ending(node.text, 60))}”")
        if go.button("Go", key=f"news_go_{node.id}", help="Go to this branch"):
            live.news = [n for n in live.news if n.id != node.id]
            ws.refresh()  # the tab's loom as stored: it lacks the branch until read again
            ws.go(node.id)
            st.rerun(scope="app")
