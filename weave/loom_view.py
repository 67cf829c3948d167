"""The loom as the page shows it: the story tree to draw and the nodes to pick from.

Turns a `weave.loom.Loom` into what `weave.story_graph` draws (the current path
highlighted, bookmarks marked, each node linking to its own URL) and labels nodes for a
picker. It reads the loom only; the drawing itself is `weave.story_graph`'s.
"""

from __future__ import annotations

import graphviz

from weave.labels import apart
from weave.loom import Loom
from weave.story_graph import OPENING_CHARS, StoryNode, opening, render_story_tree


def story_nodes(loom: Loom) -> list[StoryNode]:
    """Every node of the loom, in creation order, as the story tree draws it."""
    on_path = {node.id for node in loom.path()}
    return [
        StoryNode(
            n.id, n.parent, n.text, on_path=n.id in on_path, bookmarked=n.id in loom.bookmarks
        )
        for n in loom.nodes.values()
    ]


def story_tree(loom: Loom, story_id: str) -> graphviz.Digraph:
    """The story tree at the loom's cursor; a click on a node opens `?story=..&node=..`."""
    return render_story_tree(
        story_nodes(loom),
        cursor=loom.cursor,
        url=lambda node_id: f"?story={story_id}&node={node_id}",
    )


def node_label(loom: Loom, node_id: str) -> str:
    """A node as a picker lists it: its depth, what sets it apart from its siblings
    (`weave.labels.apart`) and a 🔖 when bookmarked."""
    depth = len(loom.path(node_id)) - 1
    mark = " 🔖" if node_id in loom.bookmarks else ""
    node = loom.node(node_id)
    if node.parent is None:
        return f"{opening(node)}{mark}"
    others = [n.text for n in loom.children(node.parent) if n.id != node_id]
    return f"{'·' * depth} {apart(node.text, others, OPENING_CHARS) or opening(node)}{mark}"
