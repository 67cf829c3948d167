"""Drawing a search's token tree as a graphviz graph.

Pure: `render_tree(tree) -> graphviz.Digraph`, no I/O (the page or a test asks graphviz
for DOT, PNG or SVG). Single-child chains are merged, so a node is a run of text that
ends where the tree splits (or where a beam finished); each edge carries the run's
probability given its parent, is shaded by it, and the best beam's edges are
highlighted. Every label is escaped here and only here: quotes, backslashes, `<>&`,
newlines and control characters never reach DOT raw.

It also draws one suggestion as HTML with each token shaded by its probability
(`suggestion_html`), escaped for Streamlit's markdown. This module does not search
(`weave.search`) or know about pages.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import graphviz

from weave.tree import Suggestion, TreeNode

MAX_LABEL = 32  # characters shown in a node; the whole run is in its tooltip
BEST_COLOR = "#d6336c"
EDGE_RGB = "1f4e79"
VISIBLE = {"\n": "↵", "\r": "↵", "\t": "⇥"}


@dataclass(frozen=True)
class Run:
    """A merged chain: the nodes from just below a split point down to the next one."""

    nodes: tuple[TreeNode, ...]

    @property
    def last(self) -> TreeNode:
        return self.nodes[-1]

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


def render_tree(
    tree: TreeNode,
    *,
    best: Sequence[int] | None = None,
    story_tail: str = "",
    max_label: int = MAX_LABEL,
) -> graphviz.Digraph:
    """The tree as a left-to-right graph.

    Args:
        tree: a search's root (its children are the first tokens of the beams).
        best: token ids of the beam to highlight (the top suggestion); None: the finished
            beam with the highest joint log-probability.
        story_tail: the story's last words, shown in the root node.
        max_label: characters per node label before it is shortened with '…'.
    Returns:
        A `graphviz.Digraph`; `.source` is the DOT text.
    """
    graph = graphviz.Digraph("lloom", graph_attr=_GRAPH, node_attr=_NODE, edge_attr=_EDGE)
    graph.node("root", label=label(_tail(story_tail, max_label) or "story"), **_ROOT)
    best_ids = list(best) if best is not None else _best_ids(tree)
    counter = iter(range(1, 1 << 62))
    pending = [("root", child, best_ids) for child in tree.children]
    while pending:
        parent_name, first, on_best = pending.pop(0)
        run = chain(first)
        name = f"n{next(counter)}"
        ids = [n.token_id for n in run.nodes]
        highlight = on_best is not None and on_best[: len(ids)] == ids
        rest = on_best[len(ids) :] if highlight else None
        _draw(graph, parent_name, name, run, highlight, max_label)
        pending.extend((name, child, rest) for child in run.last.children)
    return graph


def chain(first: TreeNode) -> Run:
    """Follow single children down from `first` to a split point or a leaf."""
    nodes = [first]
    while len(nodes[-1].children) == 1 and not nodes[-1].finished:
        nodes.append(nodes[-1].children[0])
    return Run(tuple(nodes))


def label(text: str) -> str:
    """`text` made safe as a DOT label: visible, escaped, never HTML-like.

    graphviz decodes entities such as `&amp;` even in plain labels, so '&' is escaped too.
    """
    return graphviz.escape(visible(text).replace("&", "&amp;"))


def visible(text: str) -> str:
    """Newlines and tabs as symbols, other control characters as U+2400 pictures or \\xNN,
    lone surrogates as U+FFFD: what a graph label can show and DOT can carry."""
    out = []
    for ch in text:
        if ch in VISIBLE:
            out.append(VISIBLE[ch])
        elif ord(ch) < 0x20:
            out.append(chr(0x2400 + ord(ch)))  # ␀ ␁ ... the Control Pictures block
        elif unicodedata.category(ch) == "Cc":
            out.append(f"\\x{ord(ch):02x}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def suggestion_html(suggestion: Suggestion, *, strip_space: bool = True) -> str:
    """The suggestion's tokens as spans shaded by probability, each with a tooltip.

    Args:
        suggestion: a ranked suggestion (its text may be cut inside its last token).
        strip_space: drop a leading space, as the page shows suggestions (prefix space).
    Returns:
        One HTML block, safe for `st.markdown(..., unsafe_allow_html=True)`: every piece
        of model text is HTML-escaped and markdown's special characters are entities.
    """
    spans = []
    for text, logprob in token_spans(suggestion):
        if strip_space and not spans and text.startswith(" "):
            text = text[1:]
        p = math.exp(logprob)
        shade = f"background-color: rgba(255, 160, 0, {0.08 + 0.72 * p:.2f}); border-radius: 3px"
        spans.append(f'<span title="{p:.1%}" style="{shade}">{_html_text(text)}</span>')
    return f'<div style="white-space: pre-wrap; line-height: 1.7">{"".join(spans)}</div>'


def token_spans(suggestion: Suggestion) -> list[tuple[str, float]]:
    """The suggestion's text split along its tokens, each with its log-probability.

    Tokens are matched against the text in order; auto-stop's cut shortens the last one.
    Where a piece does not match (a UTF-8 character split across tokens), the rest of
    the text becomes one span with the remaining tokens' joint log-probability.
    """
    text, pos, spans = suggestion.text, 0, []
    pairs = list(zip(suggestion.token_pieces, suggestion.token_logprobs, strict=True))
    for i, (piece, logprob) in enumerate(pairs):
        if pos >= len(text):
            break
        if not text.startswith(piece, pos) and not piece.startswith(text[pos:]):
            rest = sum(lp for _, lp in pairs[i:])
            spans.append((text[pos:], rest))
            return spans
        spans.append((text[pos : pos + len(piece)], logprob))
        pos += len(piece)
    return spans


def _html_text(text: str) -> str:
    """Every character HTML and markdown (or LaTeX) could read as syntax, as an entity."""
    return "".join(f"&#{ord(ch)};" if ch in _SPECIAL else ch for ch in visible(text))


_SPECIAL = frozenset("<>&\"'\\`*_{}[]()#+-.!|~$:=")


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tail(text: str, limit: int) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _draw(graph, parent: str, name: str, run: Run, highlight: bool, max_label: int) -> None:
    text = run.text()
    shown = text.replace(" ", "\u2423") if not text.strip() else text  # a lone space: '␣'
    tokens = " | ".join(f"{_piece(n)} {n.probability:.1%}" for n in run.nodes)
    node = {"label": label(shorten(shown, max_label)), "tooltip": label(tokens)}
    if run.last.finished:
        node.update(_LEAF)
    if highlight:
        node.update(color=BEST_COLOR, penwidth="2")
    graph.node(name, **node)
    p = run.probability
    edge = {
        "label": f"{p:.0%}" if p >= 0.01 else f"{p:.1%}",
        "color": BEST_COLOR if highlight else f"#{EDGE_RGB}{_alpha(p)}",
        "penwidth": f"{1 + 3 * p:.2f}" if not highlight else "3",
    }
    if highlight:
        edge["fontcolor"] = BEST_COLOR
    graph.edge(parent, name, **edge)


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


_GRAPH = {"rankdir": "LR", "nodesep": "0.08", "ranksep": "0.25", "fontname": "sans-serif"}
_NODE = {"shape": "box", "style": "rounded", "fontname": "sans-serif", "fontsize": "11",
         "height": "0.3", "margin": "0.08,0.03"}  # fmt: skip
_EDGE = {"fontname": "sans-serif", "fontsize": "9", "arrowsize": "0.5"}
_ROOT = {"shape": "plaintext", "fontcolor": "#555555"}
_LEAF = {"style": "rounded,filled", "fillcolor": "#f3f6fa"}
