"""Drawing a search's token tree as a graphviz graph that stays readable at page width.

Pure: `render_tree(tree) -> graphviz.Digraph`, no I/O (the page or a test asks graphviz
for DOT, PNG or SVG). Single-child chains are merged, so a node is a run of text that
ends where the tree splits (or where a beam finished); each edge carries the run's
probability given its parent, is shaded by it, and the best beam's edges are
highlighted. A `Fit` bounds the drawing: wide fans and deep or numerous runs fold into
"+k more" nodes (the folding is `weave.view.folding`'s, shared with the story graph), labels
wrap onto two short lines, so that the graph's width stays
under ~900 pt and its labels at 11 px or more when it is shown 800 px wide (the main
area of a 1280-px window with Streamlit's sidebar open). Every label is escaped here
and only here: quotes, backslashes, `<>&`, newlines and control characters never reach
DOT raw (`weave.view.story_graph` draws the loom with the same pieces).

Model text is made visible by `weave.view.present.visible`. This module does not search
(`weave.search.beams`) or know about pages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import graphviz

from weave.search.tree import TreeNode
from weave.view import folding
from weave.view.folding import Fit
from weave.view.present import shorten, visible

ROOT_LABEL = 24  # the story's tail in the root node (two lines)
BEST_COLOR = "#d6336c"
EDGE_RGB = "1f4e79"
PAGE_FIT = Fit()  # readable 800 px wide (see `render_tree`)


@dataclass(frozen=True)
class Run(folding.Run[TreeNode]):
    """A merged chain: the nodes from just below a split point down to the next one."""

    @property
    def logprob(self) -> float:
        return sum(n.logprob for n in self.nodes)

    @property
    def probability(self) -> float:
        return math.exp(self.logprob)

    def text(self) -> str:
        """The run's own text: its beam's text (cut where auto-stop cut it) less the parent's."""
        start = self.nodes[0].parent
        before = start.full_text() if start is not None else ""
        whole = self.last.text()
        if whole.startswith(before):
            return whole[len(before) :]
        return b"".join(n.piece for n in self.nodes).decode("utf-8", errors="replace")

    def children(self) -> list[Run]:
        return [chain(child) for child in self.last.children]

    def suggestions(self) -> int:
        """Finished beams at or below this run."""
        return sum(1 for leaf in self.last.leaves() if leaf.finished)


def render_tree(
    tree: TreeNode,
    *,
    best: Sequence[int] | None = None,
    story_tail: str = "",
    fit: Fit = PAGE_FIT,
) -> graphviz.Digraph:
    """The tree as a left-to-right graph that stays readable however many beams it has.

    Single-child chains are one node. Where a node has more children than `fit.children`
    (a wide fan), or a path is deeper than `fit.columns` runs, or the graph would pass
    `fit.nodes`, the least likely runs fold into one "+k more" node (k: the suggestions
    it hides). The best beam is drawn first, so it is always shown (up to the column
    limit) and highlighted. With the default fit, `dot` draws prose under ~900 pt wide, so
    shown 800 px wide its smallest labels (13-pt edge labels) are 11 px or more (measured
    by the tests on the SVG).

    Args:
        tree: a search's root (its children are the first tokens of the beams).
        best: token ids of the beam to highlight (the top suggestion); None: the finished
            beam with the highest joint log-probability.
        story_tail: the story's last words, shown in the root node.
        fit: the graph's budget.
    Returns:
        A `graphviz.Digraph`; `.source` is the DOT text.
    """
    graph = graphviz.Digraph("lloom", graph_attr=_GRAPH, node_attr=_NODE, edge_attr=_EDGE)
    graph.node("root", label=_tail_label(story_tail or "story", ROOT_LABEL), **_ROOT)
    best_ids = list(best) if best is not None else _best_ids(tree)
    on_best = _path_nodes(tree, best_ids or [])
    roots = [chain(child) for child in tree.children]
    drawn = folding.shown(roots, Run.children, _rank(on_best), fit)
    folding.walk(
        "root", roots, Run.children, drawn, (f"n{i}" for i in range(1, 1 << 62)),
        lambda parent, name, run: _draw(graph, parent, name, run, run.first in on_best, fit),
        lambda parent, name, hidden: _draw_more(graph, parent, name, hidden, on_best),
    )  # fmt: skip
    return graph


def chain(first: TreeNode) -> Run:
    """Follow single children down from `first` to a split point or a leaf."""
    nodes = [first]
    while len(nodes[-1].children) == 1 and not nodes[-1].finished:
        nodes.append(nodes[-1].children[0])
    return Run(tuple(nodes))


def _rank(on_best: set[TreeNode]):
    """The best beam's runs first, then the most likely (by joint probability)."""
    return lambda run, above: (run.first not in on_best, (above[1] if above else 0.0) - run.logprob)


def _path_nodes(tree: TreeNode, ids: Sequence[int]) -> set[TreeNode]:
    """The nodes along the beam spelled by `ids`."""
    nodes, node = set(), tree
    for token_id in ids:
        node = next((c for c in node.children if c.token_id == token_id), None)
        if node is None:
            break
        nodes.add(node)
    return nodes


def label(text: str) -> str:
    """`text` made safe as a DOT label: visible, escaped, never HTML-like.

    graphviz decodes entities such as `&amp;` even in plain labels, so '&' is escaped too.
    """
    return graphviz.escape(visible(text).replace("&", "&amp;"))


def wrapped_label(text: str, width: int, lines: int) -> str:
    """`text` as a DOT label (see `label`) of at most `lines` lines of `width` characters,
    broken after spaces where it can be; what does not fit ends in '…'."""
    rows, rest = [], visible(text)
    while rest and len(rows) < lines:
        if len(rest) <= width:
            rows.append(rest)
            rest = ""
            break
        space = rest.rfind(" ", 1, width + 1)
        cut = space + 1 if space > 0 else width
        rows.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        rows[-1] = shorten(rows[-1].rstrip() + " " + rest, width)
    return graphviz.nohtml("\\n".join(label(row) for row in rows))


def _tail_label(text: str, limit: int) -> str:
    """The last `limit` characters of `text` as a label of two lines, broken at the space
    nearest the middle (the end is what the suggestions continue, so it stays whole)."""
    text = visible(text.rstrip())
    tail = text if len(text) <= limit else "…" + text[-(limit - 1) :]
    spaces = [i for i, ch in enumerate(tail) if ch == " "]
    if len(tail) <= limit // 2 or not spaces:
        return label(tail)
    cut = min(spaces, key=lambda i: abs(i - len(tail) // 2)) + 1
    return graphviz.nohtml(label(tail[:cut]) + "\\n" + label(tail[cut:]))


def _draw(graph, parent: str, name: str, run: Run, highlight: bool, fit: Fit) -> None:
    text = run.text()
    shown = text.strip(" ") or text.replace(" ", "\u2423")  # spaces alone: '␣'
    tokens = " | ".join(f"{_piece(n)} {n.probability:.1%}" for n in run.nodes)
    node = {"label": wrapped_label(shown, fit.line, fit.lines), "tooltip": label(tokens)}
    if run.last.finished:
        node.update(_LEAF)
    if highlight:
        node.update(color=BEST_COLOR, penwidth="2")
    graph.node(name, **node)
    graph.edge(parent, name, **_edge(run.probability, highlight))


def _draw_more(graph, parent: str, name: str, hidden: list[Run], on_best: set) -> None:
    """One node for the runs folded away below `parent`: how many suggestions they hold,
    their pooled probability on the edge, their texts in the tooltip."""
    runs = sorted(hidden, key=lambda r: -r.logprob)
    listed = folding.listing([f"{visible(r.text())} {r.probability:.1%}" for r in runs])
    count_hidden = sum(r.suggestions() for r in runs)
    graph.node(name, label=f"+{count_hidden} more", tooltip=label(listed), **_MORE)
    highlight = any(run.first in on_best for run in hidden)
    edge = _edge(sum(r.probability for r in runs), highlight)
    edge.update(style="dashed", penwidth="1" if not highlight else "2")
    graph.edge(parent, name, **edge)


def _edge(p: float, highlight: bool) -> dict[str, str]:
    """An edge labelled and shaded by the probability of what it leads to."""
    edge = {
        "label": f"{p:.0%}" if p >= 0.01 else f"{p:.1%}",
        "color": BEST_COLOR if highlight else f"#{EDGE_RGB}{_alpha(p)}",
        "penwidth": f"{1 + 3 * p:.2f}" if not highlight else "3",
    }
    if highlight:
        edge["fontcolor"] = BEST_COLOR
    return edge


def _piece(node: TreeNode) -> str:
    return repr(node.piece.decode("utf-8", errors="replace"))


def _alpha(p: float) -> str:
    """Edge opacity: faint for unlikely runs, never invisible."""
    return f"{round(255 * (0.2 + 0.8 * min(max(p, 0.0), 1.0))):02x}"


def _best_ids(tree: TreeNode) -> list[int] | None:
    finished = [leaf for leaf in tree.leaves() if leaf.finished] or tree.leaves()
    if not finished:
        return None
    top = max(finished, key=lambda n: sum(m.logprob for m in n.path()))
    return top.token_ids()


_GRAPH = {"rankdir": "LR", "nodesep": "0.1", "ranksep": "0.2", "fontname": "sans-serif"}
_NODE = {"shape": "box", "style": "rounded", "fontname": "sans-serif", "fontsize": "14",
         "height": "0.3", "margin": "0.08,0.03"}  # fmt: skip
_EDGE = {"fontname": "sans-serif", "fontsize": "13", "arrowsize": "0.5"}
_MORE = {"shape": "box", "style": "rounded,dashed", "color": "#888888", "fontcolor": "#555555"}
_ROOT = {"shape": "plaintext", "fontcolor": "#555555"}
_LEAF = {"style": "rounded,filled", "fillcolor": "#f3f6fa"}
