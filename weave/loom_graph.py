"""Drawing a story's loom as a graphviz graph: every node, the current path highlighted.

Pure: `render_loom(loom) -> graphviz.Digraph`, no I/O. Each node is labelled with the
opening words of its own text (its whole text is the tooltip); the nodes and edges from
the root to the cursor are highlighted, the cursor filled, bookmarked nodes marked 🔖.
Labels are escaped by `weave.render.label`. This module does not move the cursor (the
page does, through `weave.session`) or know about pages; `opening` also names nodes in
the page's node picker.
"""

from __future__ import annotations

import graphviz

from weave.loom import Loom, Node
from weave.render import BEST_COLOR, label

OPENING_CHARS = 24
TOOLTIP_CHARS = 300
START = "(start)"
_GRAPH = {"rankdir": "TB", "nodesep": "0.15", "ranksep": "0.25", "fontname": "sans-serif"}
_NODE = {"shape": "box", "style": "rounded", "fontname": "sans-serif", "fontsize": "14",
         "height": "0.35", "margin": "0.1,0.05", "color": "#8a99ad"}  # fmt: skip
_EDGE = {"arrowsize": "0.5", "color": "#8a99ad"}
_ON_PATH = {"color": BEST_COLOR, "penwidth": "2"}
_CURSOR = {"style": "rounded,filled,bold", "fillcolor": "#fde2ec"}


def opening(node: Node, limit: int = OPENING_CHARS) -> str:
    """A node's opening words, on one line ("(start)" for the empty root)."""
    if node.parent is None:
        return START
    words = " ".join(node.text.split()) or "␣" * min(len(node.text), 3) or "∅"
    return words if len(words) <= limit else words[: limit - 1] + "…"


def render_loom(loom: Loom) -> graphviz.Digraph:
    """The loom as a top-down graph; `.source` is the DOT text."""
    on_path = {node.id for node in loom.path()}
    graph = graphviz.Digraph("loom", graph_attr=_GRAPH, node_attr=_NODE, edge_attr=_EDGE)
    for node in loom.nodes.values():
        mark = "🔖 " if node.id in loom.bookmarks else ""
        attrs = dict(_ON_PATH) if node.id in on_path else {}
        if node.id == loom.cursor:
            attrs.update(_CURSOR)
        tooltip = node.text[:TOOLTIP_CHARS] or START
        graph.node(_name(node.id), label=label(mark + opening(node)),
                   tooltip=label(f"{node.kind}: {tooltip}"), **attrs)  # fmt: skip
        if node.parent is not None:
            edge = _ON_PATH if node.id in on_path else {}
            graph.edge(_name(node.parent), _name(node.id), **edge)
    return graph


def _name(node_id: str) -> str:
    return f"n{node_id}"
