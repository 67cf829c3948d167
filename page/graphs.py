"""The page's graphs: this search's token tree and the story tree, one tab each, and Go to.

`dot` draws each graph to SVG once per graph, on the server (`svg_of`, cached by its DOT
source, itself cached per search and per tree), and only the tab shown is built; the
browser only shows it, parsing it itself (`svg_html`). Without graphviz's `dot`,
Streamlit's chart lays the DOT out in the browser. The DOT is `weave.view.render`'s (a search's
token tree) and `weave.view.story_graph`'s (the story tree, each node a link, through
`weave.view.loom_view`); a click on a story tree node moves in the session, not by the
link (static/tree_click.html). Widgets only.

The DOT and SVG texts are cached with `st.cache_resource`, not `st.cache_data`: a string
needs no copy, and `streamlit run lloom.py` imports the page to serve its `st.App` before
Streamlit's runtime exists, where each `st.cache_data` decoration printed "No runtime
found, using MemoryCacheStorageManager" (its calls use the runtime's cache all the same).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import graphviz
import streamlit as st

from weave.desk import session
from weave.desk.spot import Offer
from weave.interop.foreign import node_notes
from weave.loom.loom import Loom
from weave.view.loom_view import go_to_labels, story_tree
from weave.view.render import render_tree

TOKEN_TREE, STORY_TREE = "🔎 This search's token tree", "🌳 Story tree"
GO_TO = "go_to"  # the Go to picker's key
TREE_PICK = "tree_pick"  # the hidden box a click on the story tree posts its node to
TREE_CLICK = Path(__file__).resolve().parent / "static" / "tree_click.html"
READABLE = 0.86  # px per pt of a graph's width: its 13-pt labels stay at 11 px or more


def graphs_ui(ws: session.Workspace, offer: Offer | None) -> None:
    """This search's token tree and the story tree, one tab each, then Go to. Only the tab
    shown is drawn (switching tabs reruns the page)."""
    search_tab, tree_tab = st.tabs([TOKEN_TREE, STORY_TREE], key="graph_tab", on_change="rerun")
    with search_tab:
        if search_tab.open:
            if offer is not None:
                graph_ui(ws, offer)
            elif ws.offers.reading_state() is not None:
                st.caption("The story is being read: its search comes next.")
            else:
                st.caption("No search at this node yet.")
    with tree_tab:
        if tree_tab.open:
            loom_ui(ws)
    go_to_ui(ws)


def loom_ui(ws: session.Workspace) -> None:
    """The story tree, the current path highlighted; a click on a node goes there in this
    session (static/tree_click.html posts it to a hidden box: no reload, the tab stays)."""
    loom = ws.loom
    show_graph(story_source(ws.story_id, len(loom.nodes), loom.cursor, frozenset(loom.bookmarks),
                            loom, node_notes(ws.settings.record)))  # fmt: skip
    st.text_input("Story tree node", key=TREE_PICK, on_change=pick_tree_node, args=(ws,),
                  label_visibility="collapsed")  # fmt: skip
    st.html(TREE_CLICK.read_text(), unsafe_allow_javascript=True)


def pick_tree_node(ws: session.Workspace) -> None:
    node_id, st.session_state[TREE_PICK] = st.session_state[TREE_PICK], ""  # the next click too
    if node_id in ws.loom.nodes:
        ws.go(node_id)


def go_to_ui(ws: session.Workspace) -> None:
    """A picker to go to any run of the story tree (as the tree draws it: a run of single
    children, auto-accepted ones among them, is one entry), the folded ones too. One widget
    for every node: a move sets its value (a new widget each move cost the browser a
    remount)."""
    labels = go_to_labels(ws.loom)
    if st.session_state.get(GO_TO) != ws.cursor:
        st.session_state[GO_TO] = ws.cursor
    st.selectbox("Go to", list(labels), key=GO_TO, format_func=labels.__getitem__,
                 on_change=pick_node, args=(ws,), help="Any node of the story tree")  # fmt: skip


def pick_node(ws: session.Workspace) -> None:
    ws.go(st.session_state[GO_TO])


def graph_ui(ws: session.Workspace, offer: Offer) -> None:
    source = search_source(ws, offer)
    show_graph(source)
    dot_button, png_button = st.columns(2)
    dot_button.download_button("DOT", source, "lloom.dot", "text/vnd.graphviz",
                               key="graph_dot", on_click="ignore")  # fmt: skip
    if has_dot():
        png_button.download_button("PNG", lambda: drawn_as(source, "png"), "lloom.png",
                                   "image/png", key="graph_png", on_click="ignore")  # fmt: skip
    else:
        png_button.caption("PNG needs graphviz's `dot` (apt-get install graphviz).")


def search_source(ws: session.Workspace, offer: Offer) -> str:
    return token_tree_source(ws.story_id, offer.tag, offer, ws.loom.text(offer.node_id)[-60:])


@st.cache_resource(max_entries=64, show_spinner=False)
def token_tree_source(story_id: str, tag: str, _offer: Offer, _tail: str) -> str:
    """A search's token tree as DOT, drawn once per search (`story_id` and `tag` name it)."""
    result = _offer.result
    best = result.suggestions[0].token_ids if result.suggestions else None
    return render_tree(result.tree, best=best, story_tail=_tail).source


@st.cache_resource(max_entries=64, show_spinner=False)
def story_source(
    story_id: str, nodes: int, cursor: str, bookmarks: frozenset, _loom: Loom, _notes: dict
) -> str:
    """The story tree as DOT, drawn once per tree, place and bookmarks (nodes are only ever
    added, so their count names the tree; `_notes`, what an import kept, never change)."""
    return story_tree(_loom, story_id, _notes).source


def show_graph(source: str) -> None:
    """A graph as SVG drawn here by graphviz's `dot`, once per graph (the browser only
    shows it); without `dot`, Streamlit's chart lays it out in the browser."""
    if not has_dot():
        st.graphviz_chart(source)
        return
    st.html(svg_html(svg_of(source)), unsafe_allow_javascript=True)


def svg_html(svg: str) -> str:
    """The SVG put in the page by the browser's own parser. As markdown each of its
    elements went through Streamlit's renderer one by one (~0.1 s of the browser's time
    after an accept, bench_page.py), and `st.html` alone drops SVG. The SVG is a JSON
    string with every '<' escaped: nothing in it can end the script, and the sanitizer
    `st.html` runs keeps a script whose text holds no markup."""
    text = json.dumps(svg).replace("<", "\\u003c")
    fill = f"document.currentScript.previousElementSibling.innerHTML = {text};"
    return f'<div class="lloom-graph"></div><script>{fill}</script>'


@st.cache_resource(max_entries=64, show_spinner=False)
def svg_of(source: str) -> str:
    """`dot`'s SVG of a graph: no XML prologue, and never narrower than its labels' 11 px
    need (it scrolls instead)."""
    svg = graphviz.Source(source).pipe(format="svg", encoding="utf-8")
    svg = svg[svg.index("<svg") :]
    width = re.search(r'width="([\d.]+)pt"', svg)
    if width is None:
        return svg
    least = float(width.group(1)) * READABLE
    return svg.replace("<svg ", f'<svg style="min-width: {least:.0f}px" ', 1)


def drawn_as(source: str, fmt: str) -> bytes:
    return graphviz.Source(source).pipe(format=fmt)


def has_dot() -> bool:
    return shutil.which("dot") is not None
