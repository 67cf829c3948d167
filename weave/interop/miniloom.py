"""MiniLoom (JD-P/miniloom): read only.

`{loomTree: {nodeStore: {id: {id, timestamp, type, patch, summary, rating, read, parent,
children, model, error, finishReason}}}, focus: {id, ...}}`. A node holds no text: its
`patch` (diff-match-patch patches, as `patch_make` gives them) turns its parent's whole
text into its own whole text. They are applied exactly here (each patch's text must be
where it says), the root's first; a node's own text is what its whole text adds to its
parent's. A node whose patch rewrote its parent's text (MiniLoom's "rewrite") cannot
hang under it in LLooM, where a node only adds: it branches from the deepest ancestor
whose text its own still starts with, as an edit in LLooM does, and its MiniLoom parent
is kept. `type` user/gen/rewrite/import is the author; `rating` thumbs up/down is
`meta.rating` ±1; `summary` is `meta.note`; the patch and the rest go to
`extensions["miniloom"]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from weave.interop import foreign

NAME = "MiniLoom"
NAMESPACE = "miniloom"
AUTHORS = {"root": "human", "user": "human", "import": "human", "gen": "model", "rewrite": "mixed"}
_KNOWN = {"id", "timestamp", "type", "summary", "rating", "parent", "children", "model"}


def detect(doc: Any) -> bool:
    tree = doc.get("loomTree") if isinstance(doc, dict) else None
    return isinstance(tree, dict) and isinstance(tree.get("nodeStore"), dict)


def read(doc: dict) -> foreign.ForeignTree:
    store = foreign.object_of(doc["loomTree"]["nodeStore"], "its nodeStore")
    items = {
        foreign.node_id(k, "a node's key"): foreign.object_of(v, f"node {k!r}")
        for k, v in store.items()
    }
    parents = {
        k: None if v.get("parent") is None else foreign.node_id(v["parent"], f"node {k!r}: parent")
        for k, v in items.items()
    }
    for key, parent in parents.items():
        if parent is not None and parent not in items:
            raise ValueError(
                f"node {key!r} names a parent {parent!r} the file does not hold (an orphan)"
            )
    rank = {}
    for item in items.values():
        for i, child in enumerate(item.get("children") or ()):
            rank.setdefault(str(child), i)
    children: dict[str | None, list[str]] = {}
    for key in sorted(items, key=lambda k: rank.get(k, -1)):
        children.setdefault(parents[key], []).append(key)
    nodes = list(_materialized(items, parents, children))
    if len(nodes) < len(items):
        reached = {n.id for n in nodes}
        looped = next(k for k in items if k not in reached)
        raise ValueError(f"nodes {looped!r}… form a cycle: each is its own ancestor")
    rewrites = sum(NAMESPACE in n.extensions and "parent" in n.extensions[NAMESPACE] for n in nodes)
    focus = doc.get("focus")
    current = focus.get("id") if isinstance(focus, dict) else None
    left_out = (
        [f"{rewrites} rewrite(s) of a parent's text, which branch where their text departs"]
        if rewrites
        else []
    )
    return foreign.ForeignTree(
        NAME, nodes, current=str(current) if current is not None else None, left_out=left_out
    )


class _Step:
    """A node on the path being walked: its whole text's length, and the text itself
    unless it is a prefix of the next step's (None: it is not kept twice)."""

    __slots__ = ("key", "length", "text")

    def __init__(self, key: str, text: str) -> None:
        self.key, self.length = key, len(text)
        self.text: str | None = text


def _materialized(items: dict, parents: dict, children: dict) -> Iterator[foreign.ForeignNode]:
    """Each node reached from a root, parents first: its patches applied to its parent's
    whole text, its own text what that adds to the whole text of the deepest ancestor it
    still starts with. Depth first, keeping the whole texts of the path only, and of those
    only the ones the next node's is not an extension of: a chain of n nodes of k
    characters holds about n*k characters, not n*n*k/2."""
    path: list[_Step] = []
    todo: list[tuple[int, str]] = [(0, key) for key in reversed(children.get(None, []))]
    while todo:
        depth, key = todo.pop()
        while len(path) > depth:  # back up to this node's parent, restoring its text
            done = path.pop()
            if path and path[-1].text is None:
                path[-1].text = done.text[: path[-1].length]
        base = path[-1].text if path else ""
        whole, kept = apply_patches(items[key].get("patch") or [], base, key)
        anchor = len(path) - 1  # the path's index of the node it branches from (-1: none)
        if kept < len(base):  # a patch changed the parent's text: a rewrite, maybe
            while anchor >= 0 and not whole.startswith(_text(path, anchor)):
                anchor -= 1
        if path and anchor == len(path) - 1:
            path[-1].text = None  # a prefix of `whole`: read back from it when needed
        start = path[anchor].length if anchor >= 0 else 0
        parent = path[anchor].key if anchor >= 0 else None
        yield _node(key, items[key], parent, whole[start:], moved_from=parents[key])
        path.append(_Step(key, whole))
        todo += [(depth + 1, child) for child in reversed(children.get(key, []))]


def _text(path: list[_Step], i: int) -> str:
    """The whole text of `path[i]`: its own, else the prefix of the next one that has it."""
    j = i
    while path[j].text is None:
        j += 1
    return path[j].text if j == i else path[j].text[: path[i].length]


def apply_patches(patches: Any, text: str, key: str) -> tuple[str, int]:
    """`text` with diff-match-patch `patches` applied exactly, in order (each patch's
    position counts in the text the patches before it made), and how many of its first
    characters no patch changed. Raises ValueError naming the node when a patch's text is
    not where it says."""
    kept = len(text)
    for i, patch in enumerate(foreign.list_of(patches, f"node {key!r}: patch")):
        patch = foreign.object_of(patch, f"node {key!r}: patch {i}")
        diffs = [_diff(d, key) for d in foreign.list_of(patch.get("diffs"), f"node {key!r}: diffs")]
        start = patch.get("start1")
        if type(start) is not int or start < 0:
            raise ValueError(f"node {key!r}: patch {i} has no start1")
        before = "".join(t for op, t in diffs if op <= 0)
        after = "".join(t for op, t in diffs if op >= 0)
        if text[start : start + len(before)] != before:
            raise ValueError(f"node {key!r}: patch {i} does not apply to its parent's text")
        same = next(
            (k for k, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
            min(len(before), len(after)),
        )
        kept = min(kept, start + same)
        text = text[:start] + after + text[start + len(before) :]
    return text, kept


def _diff(diff: Any, key: str) -> tuple[int, str]:
    """One diff, written [op, text] or {"0": op, "1": text} (a JS Diff object as JSON)."""
    op, text = (
        (diff[0], diff[1])
        if isinstance(diff, list) and len(diff) == 2
        else ((diff.get("0"), diff.get("1")) if isinstance(diff, dict) else (None, None))
    )
    if op not in (-1, 0, 1) or not isinstance(text, str):
        raise ValueError(f"node {key!r} has a diff that is not [-1|0|1, text]")
    return op, text


def _node(
    key: str, item: dict, parent: str | None, text: str, *, moved_from
) -> foreign.ForeignNode:
    rating = item.get("rating")
    meta = {"rating": 1 if rating else -1} if isinstance(rating, bool) else {}
    summary = item.get("summary")
    meta |= {"note": summary} if isinstance(summary, str) and summary else {}
    model = item.get("model")
    rest = foreign.others(item, _KNOWN) | ({"parent": moved_from} if moved_from != parent else {})
    return foreign.ForeignNode(
        key,
        parent,
        text,
        author=AUTHORS.get(item.get("type")),
        created=foreign.epoch(item.get("timestamp")),
        meta=meta,
        generation={"model": model} if isinstance(model, str) and model else None,
        extensions={NAMESPACE: rest},
    )
