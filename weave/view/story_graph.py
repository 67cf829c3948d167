"""Drawing a story tree (the loom) as a graph that stays readable at page width.

Pure: `render_story_tree(nodes, cursor=...) -> graphviz.Digraph`. It takes plain
`StoryNode` values (id, parent id, the node's own text, on-current-path and bookmark
flags), so it serves any loom without importing one. Each drawn node is labelled with
what sets its text apart from its siblings' (`weave.view.labels.apart`); the path to the
cursor is highlighted, the cursor filled, bookmarks starred. It folds what would make
the graph unreadable with the token graph's folding (`weave.view.folding`: its `Fit`,
`shown` and `walk`):
- runs of single-child nodes become one node (the cursor, a bookmark or a branch point
  ends a run, and a node kept as a branch starts its own: it is not where the writer
  went); clicking it goes to the run's last node;
- a path to the cursor longer than the columns keeps its end: what lies before becomes
  one "⋯ k earlier" node;
- wide fans and surplus branches fold into "+k more" (k: the story nodes they hold),
  the current path's first, then the branches most recently grown.
Every drawn node carries its node's id as the SVG element id (`id`) and, when the page
passes `url`, a link (`URL`, opened in the page's own tab) for click-to-jump. Labels are
escaped by `weave.view.render`'s functions; `opening` and `runs` also serve the page's node
picker (a run one entry there too). This module moves no cursor and knows no page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import graphviz

from weave.view import folding
from weave.view.folding import Fit
from weave.view.labels import apart
from weave.view.render import BEST_COLOR, label, wrapped_label

STORY_FIT = Fit(columns=6, children=4, nodes=30)
START = "(start)"
OPENING_CHARS = 24
BOOKMARK = "★ "


@dataclass(frozen=True)
class StoryNode:
    """One node of a story tree as the graph needs it: `text` is the node's own text."""

    id: str
    parent: str | None
    text: str
    on_path: bool = False  # on the path from the root to the cursor
    bookmarked: bool = False
    made: str = ""  # how it was made (`weave.loom.provenance.describe`), for its tooltip
    kept: bool = False  # kept as a branch (📌): it starts a run, never folds into the one above


@dataclass(frozen=True)
class _Run(folding.Run[StoryNode]):
    """Nodes drawn as one: each but the last has exactly one child."""

    def text(self) -> str:
        return "".join(node.text for node in self.nodes)


def render_story_tree(
    nodes: Sequence[StoryNode],
    *,
    cursor: str,
    url: Callable[[str], str] | None = None,
    fit: Fit = STORY_FIT,
) -> graphviz.Digraph:
    """The story tree as a left-to-right graph; `.source` is the DOT text.

    Args:
        nodes: every node, parents before children, oldest first (the order breaks ties:
            newer branches are shown first).
        cursor: the id of the node the writer is at.
        url: node id -> the link that jumps there; None: no links.
        fit: the graph's budget (columns count drawn runs along a path).
    Raises:
        ValueError: when `cursor` or a parent is not among `nodes`.
    """
    tree = _Tree(nodes, cursor)
    graph = graphviz.Digraph("story", graph_attr=_GRAPH, node_attr=_NODE, edge_attr=_EDGE)
    start, earlier = tree.window(fit.columns)
    shown = tree.shown(start, fit, column=2 if earlier else 1)
    names = (f"s{i}" for i in range(1 << 62))
    first = next(names)
    _draw_run(graph, first, start, tree, fit, url)
    if earlier:
        before = next(names)
        _draw_earlier(graph, before, earlier, url)
        graph.edge(before, first, **_ON_PATH)
    folding.walk(
        first, tree.children(start), tree.children, shown, names,
        lambda parent, name, run: _draw_child(graph, parent, name, run, tree, fit, url),
        lambda parent, name, hidden: _draw_more(graph, parent, name, hidden, tree),
    )  # fmt: skip
    return graph


def opening(node, limit: int = OPENING_CHARS) -> str:
    """A node's opening words on one line ("(start)" for the root): any node with a
    `parent` id and its own `text` (a `StoryNode`, a `weave.loom.loom.Node`)."""
    if node.parent is None:
        return START
    words = " ".join(node.text.split()) or "␣" * min(len(node.text), 3) or "∅"
    return words if len(words) <= limit else words[: limit - 1] + "…"


def runs(nodes: Sequence[StoryNode], cursor: str) -> list[tuple[StoryNode, ...]]:
    """Every run of the tree as the graph draws it (one node each, unfolded), in tree order:
    a run before the runs below it, the older first.

    Args:
        nodes: the tree's nodes, a parent before its children; cursor: the current node's id.
    Returns:
        each run's nodes, first to last (the one a click on it goes to).
    """
    tree = _Tree(nodes, cursor)
    found, todo = [], [tree.root]
    while todo:
        run = todo.pop()
        found.append(run.nodes)
        todo.extend(reversed(tree.children(run)))
    return found


class _Tree:
    """The nodes indexed, cut into runs, with what each run's subtree holds."""

    def __init__(self, nodes: Sequence[StoryNode], cursor: str):
        self.by_id = {node.id: node for node in nodes}
        self.order = {node.id: i for i, node in enumerate(nodes)}
        if cursor not in self.by_id:
            raise ValueError(f"the cursor {cursor!r} is not a node of the tree")
        self.cursor = cursor
        self.kids: dict[str | None, list[StoryNode]] = {}
        for node in nodes:
            if node.parent is not None and node.parent not in self.by_id:
                raise ValueError(f"node {node.id!r} has no parent {node.parent!r} in the tree")
            self.kids.setdefault(node.parent, []).append(node)
        roots = self.kids.get(None, [])
        if len(roots) != 1:
            raise ValueError(f"a story tree has one root, not {len(roots)}")
        self.root = self.run_from(roots[0])
        self.ancestors = set()  # the cursor and the nodes above it
        node: StoryNode | None = self.by_id[cursor]
        while node is not None:
            self.ancestors.add(node.id)
            node = self.by_id.get(node.parent) if node.parent is not None else None
        self._size: dict[str, int] = {}
        self._newest: dict[str, int] = {}

    def run_from(self, first: StoryNode) -> _Run:
        """Follow single children from `first` while nothing worth its own node comes."""
        run = [first]
        while True:
            node = run[-1]
            below = self.kids.get(node.id, [])
            if len(below) != 1:
                return _Run(tuple(run))
            child = below[0]
            if self._stands_alone(node) or self._stands_alone(child) or child.kept:
                return _Run(tuple(run))
            if child.on_path != node.on_path:
                return _Run(tuple(run))
            run.append(child)

    def _stands_alone(self, node: StoryNode) -> bool:
        return node.id == self.cursor or node.bookmarked or node.parent is None

    def children(self, run: _Run) -> list[_Run]:
        return [self.run_from(child) for child in self.kids.get(run.last.id, [])]

    def size(self, run: _Run) -> int:
        """Story nodes in the run and below it."""
        key = run.nodes[0].id
        if key not in self._size:
            below = sum(self.size(child) for child in self.children(run))
            self._size[key] = len(run.nodes) + below
        return self._size[key]

    def newest(self, run: _Run) -> int:
        """The creation index of the newest node in the run or below it."""
        key = run.nodes[0].id
        if key not in self._newest:
            own = max(self.order[node.id] for node in run.nodes)
            self._newest[key] = max([own, *(self.newest(c) for c in self.children(run))])
        return self._newest[key]

    def path_runs(self) -> list[_Run]:
        """The runs from the root to the one holding the cursor."""
        runs, run = [self.root], self.root
        while self.cursor not in {node.id for node in run.nodes}:
            run = next(c for c in self.children(run) if c.nodes[0].id in self.ancestors)
            runs.append(run)
        return runs

    def window(self, columns: int) -> tuple[_Run, list[_Run]]:
        """The run the drawing starts from, and the path runs folded before it."""
        path = self.path_runs()
        if len(path) <= columns:
            return path[0], []
        cut = len(path) - columns + 1  # one column goes to the "earlier" node
        return path[cut], path[:cut]

    def shown(self, start: _Run, fit: Fit, *, column: int) -> set[StoryNode]:
        """First nodes of the runs to draw below `start` (drawn in `column`): the current
        path's first, then runs holding a bookmark, then the most recently grown, within
        the fit."""

        def rank(run: _Run, above: tuple) -> tuple:
            on_path = run.first.on_path or run.first.id in self.ancestors
            return (not on_path, not any(n.bookmarked for n in run.nodes), -self.newest(run))

        return folding.shown(self.children(start), self.children, rank, fit, column=column + 1)


def _draw_child(graph, parent: str, name: str, run: _Run, tree: _Tree, fit: Fit, url) -> None:
    _draw_run(graph, name, run, tree, fit, url)
    graph.edge(parent, name, **(_ON_PATH if run.last.on_path else {}))


def _draw_run(graph, name: str, run: _Run, tree: _Tree, fit: Fit, url) -> None:
    target = run.last
    text = run.text()
    first = run.nodes[0]
    others = [node.text for node in tree.kids.get(first.parent, []) if node is not first]
    opening = apart(text, others, len(text) + 1) if first.parent is not None else ""
    opening = opening or ("␣" if text else START if target.parent is None else "∅")
    mark = BOOKMARK if any(node.bookmarked for node in run.nodes) else ""
    steps = f" ({len(run.nodes)} steps)" if len(run.nodes) > 1 else ""
    attrs = {
        "label": wrapped_label(mark + opening, fit.line, fit.lines),
        "tooltip": label(_shorten_tooltip(text) + steps + _made(run)),
        "id": label(target.id),
    }
    if target.on_path:
        attrs.update(_ON_PATH)
    if tree.cursor in {node.id for node in run.nodes}:
        attrs.update(_CURSOR)
    if mark:
        attrs["peripheries"] = "2"
    if url is not None:
        attrs.update(URL=label(url(target.id)), target="_top")
    graph.node(name, **attrs)


def _draw_earlier(graph, name: str, earlier: list[_Run], url) -> None:
    """The folded start of a long path: one node; a click goes to its last node."""
    steps = sum(1 for run in earlier for node in run.nodes if node.parent is not None)
    target = earlier[-1].last
    attrs = {
        "label": f"⋯ {steps} earlier",
        "tooltip": label(_shorten_tooltip("".join(run.text() for run in earlier))),
        "id": label(target.id),
    }
    if url is not None:
        attrs.update(URL=label(url(target.id)), target="_top")
    graph.node(name, **attrs, **_MORE, **_ON_PATH)


def _draw_more(graph, parent: str, name: str, hidden: list[_Run], tree: _Tree) -> None:
    listed = folding.listing([" ".join(run.text().split())[:40] for run in hidden])
    hidden_nodes = sum(tree.size(run) for run in hidden)
    graph.node(name, label=f"+{hidden_nodes} more", tooltip=label(listed), **_MORE)
    graph.edge(parent, name, style="dashed")


def _made(run: _Run) -> str:
    """How the run's nodes were made, each way once, for its tooltip ("" when none says)."""
    ways = dict.fromkeys(node.made for node in run.nodes if node.made)
    return f" — {'; '.join(ways)}" if ways else ""


def _shorten_tooltip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


_GRAPH = {"rankdir": "LR", "nodesep": "0.1", "ranksep": "0.3", "fontname": "sans-serif"}
_NODE = {"shape": "box", "style": "rounded", "fontname": "sans-serif", "fontsize": "14",
         "height": "0.3", "margin": "0.08,0.03", "color": "#8a99ad"}  # fmt: skip
_EDGE = {"arrowsize": "0.5", "color": "#8a99ad"}
_ON_PATH = {"color": BEST_COLOR, "penwidth": "2"}
_CURSOR = {"style": "rounded,filled,bold", "fillcolor": "#fde2ec"}
_MORE = {"shape": "box", "style": "rounded,dashed", "fontcolor": "#555555"}
