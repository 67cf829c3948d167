"""The writer's stories on the page: on the start page, starting one (a starting story or
the writer's own) and the library of saved ones to reopen, delete (recoverable), restore
or purge, each deletion and purge confirmed first; in the sidebar, the open story's title
and bookmarks. Widgets only: the stories are `weave.desk.library.Library`'s, a tab's
moves `weave.desk.session.Workspace`'s."""

from __future__ import annotations

import streamlit as st

from page.state import tab
from weave.config import Settings
from weave.desk import session
from weave.loom.store import StoryInfo
from weave.view import present
from weave.view.labels import ending
from weave.view.present import md

OWN_STORY = "✍️ Write my own"


def start_ui(settings: Settings, ws: session.Workspace) -> None:
    st.title("🧶 LLooM")
    st.caption("Weave a story with a language model, a few tokens at a time.")
    choice = st.radio("Start from", [*settings.starting_stories, OWN_STORY], key="start_choice")
    own = st.text_area("Your story", key="start_text", disabled=choice != OWN_STORY)
    text = own if choice == OWN_STORY else choice
    if st.button("Start", type="primary", key="start"):
        if not text.strip():
            st.warning("Write a few words first.")
            return
        if ws.start(text):
            st.rerun()


def library_ui(ws: session.Workspace) -> None:
    """Saved stories to reopen (title, nodes, last edited), each deletable; then the deleted."""
    entries = ws.library.stories()
    if entries:
        st.subheader("Your stories")
    for entry in entries:
        story_row(ws, entry)
    deleted = ws.library.stories(deleted=True)
    if deleted:
        with st.expander(f"Deleted stories ({len(deleted)}): kept until purged"):
            for entry in deleted:
                deleted_row(ws, entry)


def story_row(ws: session.Workspace, entry: StoryInfo) -> None:
    title, edited, delete = st.columns([6, 2, 1], vertical_alignment="center")
    title.button(f"📖 {entry.title}", key=f"open_{entry.id}", on_click=ws.open, args=(entry.id,))
    shared = f" · 👥 {md(entry.owner)}'s" if entry.owner else ""  # another writer's, shared
    edited.caption(f"{entry.nodes} nodes · edited {present.when(entry.updated)}{shared}")
    if entry.role != "owner":  # only its owner deletes it
        return
    if tab().confirm_delete != entry.id:
        delete.button("🗑️ Delete", key=f"delete_{entry.id}",
                      help="Delete (recoverable until purged)",
                      on_click=ask, args=("confirm_delete", entry.id))  # fmt: skip
        return
    st.warning(f"Delete “{md(entry.title)}”? It stays recoverable until you purge it.")
    yes, no = st.columns(2)
    yes.button("Yes, delete", key=f"delete_yes_{entry.id}", on_click=confirm,
               args=("confirm_delete", ws.library.delete, entry.id))  # fmt: skip
    no.button("Cancel", key=f"delete_no_{entry.id}", on_click=ask, args=("confirm_delete", None))


def deleted_row(ws: session.Workspace, entry: StoryInfo) -> None:
    title, restore, purge = st.columns([6, 2, 2], vertical_alignment="center")
    title.markdown(f"{md(entry.title)} · deleted, edited {present.when(entry.updated)}")
    restore.button(
        "Restore", key=f"restore_{entry.id}", on_click=ws.library.restore, args=(entry.id,)
    )
    if tab().confirm_purge != entry.id:
        purge.button("Purge…", key=f"purge_{entry.id}", on_click=ask,
                     args=("confirm_purge", entry.id))  # fmt: skip
        return
    purge.button("Purge forever", key=f"purge_yes_{entry.id}", type="primary",
                 on_click=confirm, args=("confirm_purge", ws.library.purge, entry.id))  # fmt: skip


def ask(flag: str, value: str | None) -> None:
    """Set `flag` ("confirm_delete" or "confirm_purge"): the story awaiting a yes."""
    setattr(tab(), flag, value)


def confirm(flag: str, action, story_id: str) -> None:
    setattr(tab(), flag, None)
    action(story_id)


def story_info_ui(ws: session.Workspace) -> None:
    st.subheader("Story")
    key = f"title_{ws.story_id}"
    if tab().title_shown != (ws.story_id, ws.title):  # renamed, or its opening rewritten
        st.session_state[key] = ws.title
        tab().title_shown = (ws.story_id, ws.title)
    st.text_input("Title", key=key, on_change=rename, args=(ws, ws.story_id, key),
                  disabled=ws.role != "owner")  # fmt: skip
    st.button("📚 All stories · new story", key="close", on_click=ws.close)


def bookmarks_ui(ws: session.Workspace) -> None:
    """The bookmarked nodes, oldest first; a click goes there."""
    loom = ws.loom
    marked = [node_id for node_id in loom.nodes if node_id in loom.bookmarks]
    if not marked:
        return
    st.subheader("Bookmarks")
    for node_id in marked:
        label = ending(loom.text(node_id), 40)
        st.button(f"🔖 {label}", key=f"mark_{node_id}",
                  on_click=ws.go, args=(node_id,), disabled=node_id == ws.cursor,
                  width="stretch")  # fmt: skip


def rename(ws: session.Workspace, story_id: str, key: str) -> None:
    ws.rename(story_id, st.session_state[key])
