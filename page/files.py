"""The page's files in the sidebar: importing a story (any loom format `weave.interop`
reads, in a popover) and the downloads (the story as .txt and .md, the loom as LLooM's
JSON and Open Loom v2, this node's search tree and graph)."""

from __future__ import annotations

import json
from functools import partial

import streamlit as st

from page.graphs import drawn_as, has_dot, search_source
from page.state import tab
from weave.desk import session
from weave.desk.spot import Offer
from weave.interop import openloom
from weave.view.present import md


def import_ui(ws: session.Workspace) -> None:
    """Open an exported story (.json: the loom, or an older session) as a new story. In a
    popover: a file drop zone in the sidebar cost the browser ~15 ms on every move. What an
    import did is said once, in a toast where the writer is looking (and a failure in the
    sidebar too, until the next run): it never stays on into the next story."""
    problem, opened = tab().import_error, tab().imported
    tab().import_error = tab().imported = None
    if opened:
        st.toast(f"Imported and opened “{md(opened)}”.", icon="📥")
    with st.popover("📥 Import a story", width="stretch"):
        key = f"import_{tab().imports}"
        st.file_uploader(IMPORT_LABEL, type=["json", "openloom"], key=key,
                         on_change=import_file, args=(ws, key))  # fmt: skip
    if problem:
        said = md(problem[:1].upper() + problem[1:])  # it names the file and says why
        st.toast(said, icon="⚠️")
        st.error(said, icon="📄")


IMPORT_LABEL = (
    "Import a story (.json: LLooM, Open Loom, socketteer loom, Loomsidian, "
    "ExoLoom, MiniLoom, basemode-loom, mikupad)"
)


def import_file(ws: session.Workspace, key: str) -> None:
    upload = st.session_state.get(key)
    if upload is None:
        return
    story_id, said = ws.library.import_file(upload.getvalue())
    problem = said if story_id is None else None  # said: what is wrong, or what to say
    if story_id is not None and not ws.open(story_id, notice=said):  # this story's moves
        problem = (f"the file was imported as “{ws.library.title(story_id)}”, but this "
                   "story stays open until its changes are saved; open it from the library "
                   "then")  # fmt: skip
    tab().import_error = problem
    if problem is None:
        tab().imports += 1  # a fresh uploader
        tab().imported = ws.title


def downloads_ui(ws: session.Workspace, offer: Offer | None) -> None:
    """The story shown (.txt, .md), the whole loom (.json), and this node's search."""
    st.subheader("Downloads")
    text, title = ws.text, ws.title
    one, two = st.columns(2)
    download(one, "Story .txt", text, "story.txt", "text/plain")
    download(two, "Story .md", lambda: f"# {title}\n\n{text}\n", "story.md", "text/markdown")
    if not ws.pending:  # the export is the store's: it holds what is saved
        loom = partial(ws.library.export, ws.story_id)
        download(one, "Loom .json", loom, "lloom-loom.json", "application/json")
        download(two, "Open Loom v2", partial(ws.library.export_openloom, ws.story_id),
                 "story.openloom",
                 openloom.MEDIA_TYPE)  # fmt: skip
    if offer is None:
        return
    tree = lambda: json.dumps(offer.result.tree.to_dict(), ensure_ascii=False, indent=1,  # noqa: E731
                              allow_nan=False)  # fmt: skip
    download(two, "Tree .json", tree, "tree.json", "application/json")
    source = search_source(ws, offer)
    download(one, "Graph .dot", source, "lloom.dot", "text/vnd.graphviz")
    if has_dot():
        download(two, "Graph .png", lambda: drawn_as(source, "png"), "lloom.png", "image/png")
        download(one, "Graph .svg", lambda: drawn_as(source, "svg"), "lloom.svg",
                 "image/svg+xml")  # fmt: skip
    else:
        st.caption("PNG and SVG need graphviz's `dot` (apt-get install graphviz).")


def download(column, label: str, data, file_name: str, mime: str) -> None:
    """A download that does not rerun the page (data may be a function, run on click)."""
    key = "dl_" + file_name.replace(".", "_").replace("-", "_")
    column.download_button(label, data, file_name, mime, key=key, on_click="ignore")
