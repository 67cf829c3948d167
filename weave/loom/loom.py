"""The story as a loom: a tree of immutable text nodes, a cursor, and the moves over it.

A loom starts at a root node with no text. Every other node holds its own text (never
the whole story) and names its parent; the story shown is the text of the nodes from the
root to the cursor, joined. Nodes are only ever added, never changed or removed. Beside
the nodes a loom keeps three small records: the cursor, the checked-out child of each
parent (going back and then forward returns to the branch you were on) and bookmarks.

The moves, each returning a new `Loom` (the old one is left as it was):
- `accept(text)`: a child of the cursor holding `text`, and the cursor moves to it; when
  the cursor already has a child with exactly that text, the cursor moves to that one.
- `keep(text)`: the same child, but the cursor stays (a branch to explore later).
- `edit(text)`: the story becomes `text`, branching at a node boundary. The branch point
  is the deepest node on the current path whose path text is a prefix of `text`; the new
  node (kind "edited") holds the rest. An edit inside a node's text therefore branches
  before that node, and the new node repeats the unchanged start of it: nodes are never
  split, because splitting would change a node that exists. An edit that only cuts the
  story back to a node boundary adds nothing and moves there.
- `go(node)`: the cursor moves to any node, and every node on its path becomes its
  parent's checked-out child. `undo` goes to the parent, `redo` to the checked-out child
  (else the newest child), `sibling(±1)` to the previous or next sibling.
- `bookmark(node, on)`.

This module does no I/O and knows no backend: token ids are opaque ints, tagged with the
model whose tokenizer made them. Keeping a loom is `weave.loom.store`'s; searching is
`weave.search.beams`'s.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from weave.loom.provenance import Provenance

KINDS = ("typed", "edited", "accepted", "sampled")
TITLE_CHARS = 48


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def title_for(text: str) -> str:
    """A story's default title: the words of its first line with any ("Untitled" when it
    has none); the store numbers it where another story has it already."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    words = " ".join(line.split()) or "Untitled"
    return words if len(words) <= TITLE_CHARS else words[: TITLE_CHARS - 1] + "…"


class NoSuchNode(LookupError):
    """A move named a node the loom does not hold."""


@dataclass(frozen=True)
class Node:
    """One piece of a story: its own text, and how it came to be."""

    id: str
    parent: str | None  # None for the root only
    text: str  # this node's text; the story is the texts from the root, joined
    kind: str  # one of KINDS
    token_ids: tuple[int, ...] | None = None  # ids of `text` alone, when known
    model: str | None = None  # the model whose tokenizer made `token_ids`
    params: dict[str, Any] | None = None  # the search or sampling parameters that made it
    score: float | None = None  # its score in that search, under its ranking (weave.search.scores)
    created: float = 0.0  # seconds since the epoch
    provenance: Provenance | None = None  # who or what made it; None: made before it was kept

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a node's kind is one of {', '.join(KINDS)}, not {self.kind!r}")


@dataclass(frozen=True)
class Loom:
    """A story's whole tree with its cursor, checked-out children and bookmarks.

    `nodes` is in creation order (a parent always before its children). Treat a loom as
    a value: the moves return new looms and never change this one.
    """

    nodes: Mapping[str, Node]
    root: str
    cursor: str
    checkouts: Mapping[str, str] = field(default_factory=dict)  # parent id -> child id
    bookmarks: frozenset[str] = frozenset()

    @classmethod
    def new(
        cls, text: str = "", *, kind: str = "typed", created: float | None = None, **node: Any
    ) -> Loom:
        """A loom with an empty root and, when `text` is not empty, one node holding it."""
        created = time.time() if created is None else created
        root = Node(new_id(), None, "", "typed", created=created)
        loom = cls({root.id: root}, root.id, root.id)
        return loom.accept(text, kind=kind, created=created, **node) if text else loom

    # -- reading ------------------------------------------------------------------------
    def node(self, node_id: str | None = None) -> Node:
        """The node `node_id` (the cursor's by default). Raises `NoSuchNode`."""
        node_id = self.cursor if node_id is None else node_id
        try:
            return self.nodes[node_id]
        except KeyError:
            raise NoSuchNode(f"the story has no node {node_id!r}") from None

    @cached_property
    def _children(self) -> dict[str, list[Node]]:
        children: dict[str, list[Node]] = {node_id: [] for node_id in self.nodes}
        for node in self.nodes.values():
            if node.parent is not None:
                children[node.parent].append(node)
        return children

    def children(self, node_id: str | None = None) -> list[Node]:
        """A node's children, oldest first."""
        return list(self._children[self.node(node_id).id])

    def path(self, node_id: str | None = None) -> list[Node]:
        """The nodes from the root to `node_id` (the cursor's by default), root first."""
        path = [self.node(node_id)]
        while path[-1].parent is not None:
            path.append(self.nodes[path[-1].parent])
        return path[::-1]

    def text(self, node_id: str | None = None) -> str:
        """The story at `node_id` (the cursor by default): its path's texts, joined."""
        return "".join(n.text for n in self.path(node_id))

    def token_ids(self, node_id: str | None = None, *, model: str) -> tuple[int, ...] | None:
        """The path's token ids for `model`; None when a node on it has none for `model`."""
        ids: list[int] = []
        for node in self.path(node_id):
            if node.text and (node.token_ids is None or node.model != model):
                return None
            ids += node.token_ids or ()
        return tuple(ids)

    def siblings(self, node_id: str | None = None) -> list[Node]:
        """The node and its siblings, oldest first (the root is its own only sibling)."""
        node = self.node(node_id)
        return [node] if node.parent is None else self.children(node.parent)

    def sibling_position(self, node_id: str | None = None) -> tuple[int, int]:
        """(i, n): the node is the i-th (from 1) of its parent's n children."""
        siblings = [n.id for n in self.siblings(node_id)]
        return siblings.index(self.node(node_id).id) + 1, len(siblings)

    def child_with_text(self, parent: str, text: str) -> Node | None:
        return next((c for c in self._children[self.node(parent).id] if c.text == text), None)

    # -- where the navigation moves go --------------------------------------------------
    def undo_target(self) -> str | None:
        """The cursor's parent; None at the root."""
        return self.node().parent

    def redo_target(self) -> str | None:
        """The cursor's checked-out child, else its newest child; None at a leaf."""
        checked_out = self.checkouts.get(self.cursor)
        if checked_out is not None:
            return checked_out
        children = self._children[self.cursor]
        return children[-1].id if children else None

    def sibling_target(self, step: int) -> str | None:
        """The sibling `step` places after the cursor (before, when negative); None past the end."""
        i, n = self.sibling_position()
        to = i - 1 + step
        return self.siblings()[to].id if 0 <= to < n else None

    # -- moves --------------------------------------------------------------------------
    def go(self, node_id: str) -> Loom:
        """The cursor at `node_id`; every node on its path becomes its parent's checked-out one."""
        path = self.path(node_id)
        checkouts = dict(self.checkouts)
        for parent, child in zip(path, path[1:], strict=False):
            checkouts[parent.id] = child.id
        return replace(self, cursor=node_id, checkouts=checkouts)

    def at(self, node_id: str) -> Loom:
        """The cursor at `node_id`, checked-out children unchanged (a tab's own cursor)."""
        return replace(self, cursor=self.node(node_id).id)

    def undo(self) -> Loom:
        target = self.undo_target()
        return self if target is None else self.go(target)

    def redo(self) -> Loom:
        target = self.redo_target()
        return self if target is None else self.go(target)

    def sibling(self, step: int) -> Loom:
        target = self.sibling_target(step)
        return self if target is None else self.go(target)

    def grow(
        self, parent: str, text: str, *, kind: str = "accepted", **node: Any
    ) -> tuple[Loom, Node]:
        """A child of `parent` holding `text`, and that child.

        When `parent` has a child with exactly `text`, that child is returned and nothing
        is added; an empty `text` adds nothing and returns `parent` itself. `node` holds
        the new node's other fields (token_ids, model, params, score, created, provenance, id).
        """
        existing = self.node(parent) if not text else self.child_with_text(parent, text)
        if existing is not None:
            return self, existing
        node.setdefault("created", time.time())
        made = Node(node.pop("id", None) or new_id(), parent, text, kind, **node)
        if made.id in self.nodes:
            raise ValueError(f"the story already has a node {made.id!r}")
        return replace(self, nodes={**self.nodes, made.id: made}), made

    def accept(self, text: str, *, kind: str = "accepted", **node: Any) -> Loom:
        """The cursor moves to a child holding `text` (an identical one, when there is one)."""
        loom, child = self.grow(self.cursor, text, kind=kind, **node)
        return loom.go(child.id)

    def keep(self, text: str, *, kind: str = "accepted", **node: Any) -> Loom:
        """A child of the cursor holding `text`; the cursor stays where it is."""
        return self.grow(self.cursor, text, kind=kind, **node)[0]

    def edit(self, text: str, *, kind: str = "edited", **node: Any) -> Loom:
        """The story becomes `text`: a branch from the longest common prefix at a node boundary.

        Nothing is added when `text` is the story at a node of the current path (or at one
        of that node's children): the cursor moves there.
        """
        base, start = self.root, 0
        for n in self.path()[1:]:
            if not text.startswith(n.text, start):
                break
            base, start = n.id, start + len(n.text)
        loom, child = self.grow(base, text[start:], kind=kind, **node)
        return loom.go(child.id)

    def bookmark(self, node_id: str, on: bool = True) -> Loom:
        node_id = self.node(node_id).id
        marks = self.bookmarks | {node_id} if on else self.bookmarks - {node_id}
        return replace(self, bookmarks=frozenset(marks))
