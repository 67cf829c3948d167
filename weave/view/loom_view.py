"""The loom as the page shows it: the story tree to draw and the nodes to pick from.

Turns a `weave.loom.loom.Loom` into what `weave.view.story_graph` draws (the current path
highlighted, bookmarks marked, each node linking to its own URL and saying in its tooltip
how it was made) and labels nodes for a picker. It reads the loom only; the drawing itself
is `weave.view.story_graph`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

import graphviz

from weave.loom.loom import Loom, Node
from weave.loom.provenance import describe
from weave.view.labels import apart
from weave.view.story_graph import OPENING_CHARS, StoryNode, opening, render_story_tree, runs


def story_nodes(loom: Loom, notes: Mapping[str, str] | None = None) -> list[StoryNode]:
    """Every node of the loom, in creation order, as the story tree draws it; `notes`: what
    an import kept of a node (its bookmark's label, tags, rating), said after how it was made."""
    on_path, notes = {node.id for node in loom.path()}, notes or {}
    return [
        StoryNode(
            n.id,
            n.parent,
            n.text,
            on_path=n.id in on_path,
            bookmarked=n.id in loom.bookmarks,
            made=_made(n, notes.get(n.id)),
            kept=n.provenance is not None and n.provenance.how == "kept",
        )
        for n in loom.nodes.values()
    ]


def _made(node: Node, note: str | None) -> str:
    """How `node` was made, and what an import kept of it ("" for the root)."""
    if node.parent is None:
        return ""
    return " · ".join(filter(None, (describe(node.provenance), note)))


def story_tree(
    loom: Loom, story_id: str, notes: Mapping[str, str] | None = None
) -> graphviz.Digraph:
    """The story tree at the loom's cursor; a click on a node opens `?story=..&node=..`."""
    return render_story_tree(
        story_nodes(loom, notes),
        cursor=loom.cursor,
        url=lambda node_id: f"?story={story_id}&node={node_id}",
    )


def go_to_labels(loom: Loom) -> dict[str, str]:
    """What a picker lists, in tree order: one entry a run, as the story tree draws them (a
    run of auto-accepted suggestions is one), keyed by the run's last node, where it goes.
    The cursor is always an entry (it ends its run)."""
    nodes = story_nodes(loom)
    return {run[-1].id: node_label(loom, run[-1].id, run[0].id)
            for run in runs(nodes, loom.cursor)}  # fmt: skip


def node_label(loom: Loom, node_id: str, first: str | None = None) -> str:
    """A node (or the run of single children from `first` down to it) as a picker lists
    it: its first node's depth, what sets its text apart from its siblings'
    (`weave.view.labels.apart`), a 🔖 when bookmarked, how its first node was made (a
    picker's options have no tooltip), and how many pieces a run holds."""
    node, start = loom.node(node_id), loom.node(first or node_id)
    mark = " 🔖" if node_id in loom.bookmarks else ""
    if start.parent is None:
        return f"{opening(start)}{mark}"
    path = loom.path(node_id)
    pieces = path[[n.id for n in path].index(start.id) :]
    text = "".join(n.text for n in pieces)
    others = [n.text for n in loom.children(start.parent) if n.id != start.id]
    label = apart(text, others, OPENING_CHARS) or opening(node)
    count = f" · {len(pieces)} pieces" if len(pieces) > 1 else ""
    return f"{'·' * (len(path) - len(pieces))} {label}{mark} — {describe(start.provenance)}{count}"
