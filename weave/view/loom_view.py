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
from weave.view.story_graph import OPENING_CHARS, StoryNode, opening, render_story_tree


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


def node_label(loom: Loom, node_id: str) -> str:
    """A node as a picker lists it: its depth, what sets it apart from its siblings
    (`weave.view.labels.apart`), a 🔖 when bookmarked, and how it was made (a picker's
    options have no tooltip)."""
    node = loom.node(node_id)
    mark = " 🔖" if node_id in loom.bookmarks else ""
    if node.parent is None:
        return f"{opening(node)}{mark}"
    depth = len(loom.path(node_id)) - 1
    others = [n.text for n in loom.children(node.parent) if n.id != node_id]
    label = apart(node.text, others, OPENING_CHARS) or opening(node)
    return f"{'·' * depth} {label}{mark} — {describe(node.provenance)}"
