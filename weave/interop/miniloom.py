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

from typing import Any

from weave.interop.foreign import (
    ForeignNode,
    ForeignTree,
    epoch,
    list_of,
    node_id,
    object_of,
    others,
)

NAME = "MiniLoom"
NAMESPACE = "miniloom"
AUTHORS = {"root": "human", "user": "human", "import": "human", "gen": "model", "rewrite": "mixed"}
_KNOWN = {"id", "timestamp", "type", "summary", "rating", "parent", "children", "model"}


def detect(doc: Any) -> bool:
    tree = doc.get("loomTree") if isinstance(doc, dict) else None
    return isinstance(tree, dict) and isinstance(tree.get("nodeStore"), dict)


def read(doc: dict) -> ForeignTree:
    store = object_of(doc["loomTree"]["nodeStore"], "its nodeStore")
    items = {node_id(k, "a node's key"): object_of(v, f"node {k!r}") for k, v in store.items()}
    parents = {k: None if v.get("parent") is None else node_id(v["parent"], f"node {k!r}: parent")
               for k, v in items.items()}  # fmt: skip
    for key, parent in parents.items():
        if parent is not None and parent not in items:
            raise ValueError(f"node {key!r} names a parent {parent!r} the file does not hold "
                             "(an orphan)")  # fmt: skip
    whole: dict[str, str] = {}
    for key in items:
        _materialize(key, items, parents, whole)
    rank = {}
    for item in items.values():
        for i, child in enumerate(item.get("children") or ()):
            rank.setdefault(str(child), i)
    nodes, rewrites = [], 0
    for key, item in sorted(items.items(), key=lambda kv: rank.get(kv[0], -1)):
        parent = parents[key]
        while parent is not None and not whole[key].startswith(whole[parent]):
            parent = parents[parent]
        rewrites += parent != parents[key]
        nodes.append(_node(key, item, parent, whole, moved_from=parents[key]))
    focus = doc.get("focus")
    current = focus.get("id") if isinstance(focus, dict) else None
    left_out = [f"{rewrites} rewrite(s) of a parent's text, which branch where their text "
                "departs"] if rewrites else []  # fmt: skip
    return ForeignTree(NAME, nodes, current=str(current) if current is not None else None,
                       left_out=left_out)  # fmt: skip


def _materialize(key: str, items: dict, parents: dict, whole: dict) -> None:
    """The whole text of `key` (and of its ancestors), into `whole`; a cycle is an error."""
    chain, at = [], key
    while at is not None and at not in whole:
        if at in chain:
            raise ValueError(f"nodes {at!r}… form a cycle: each is its own ancestor")
        chain.append(at)
        at = parents[at]
    for at in reversed(chain):
        base = "" if parents[at] is None else whole[parents[at]]
        whole[at] = apply_patches(items[at].get("patch") or [], base, at)


def apply_patches(patches: Any, text: str, key: str) -> str:
    """`text` with diff-match-patch `patches` applied exactly, in order (each patch's
    position counts in the text the patches before it made). Raises ValueError naming
    the node when a patch's text is not where it says."""
    for i, patch in enumerate(list_of(patches, f"node {key!r}: patch")):
        patch = object_of(patch, f"node {key!r}: patch {i}")
        diffs = [_diff(d, key) for d in list_of(patch.get("diffs"), f"node {key!r}: diffs")]
        start = patch.get("start1")
        if type(start) is not int or start < 0:
            raise ValueError(f"node {key!r}: patch {i} has no start1")
        before = "".join(t for op, t in diffs if op <= 0)
        after = "".join(t for op, t in diffs if op >= 0)
        if text[start : start + len(before)] != before:
            raise ValueError(f"node {key!r}: patch {i} does not apply to its parent's text")
        text = text[:start] + after + text[start + len(before) :]
    return text


def _diff(diff: Any, key: str) -> tuple[int, str]:
    """One diff, written [op, text] or {"0": op, "1": text} (a JS Diff object as JSON)."""
    op, text = (diff[0], diff[1]) if isinstance(diff, list) and len(diff) == 2 else (
        (diff.get("0"), diff.get("1")) if isinstance(diff, dict) else (None, None))  # fmt: skip
    if op not in (-1, 0, 1) or not isinstance(text, str):
        raise ValueError(f"node {key!r} has a diff that is not [-1|0|1, text]")
    return op, text


def _node(key: str, item: dict, parent: str | None, whole: dict, *, moved_from) -> ForeignNode:
    rating = item.get("rating")
    meta = {"rating": 1 if rating else -1} if isinstance(rating, bool) else {}
    summary = item.get("summary")
    meta |= {"note": summary} if isinstance(summary, str) and summary else {}
    model = item.get("model")
    rest = others(item, _KNOWN) | ({"parent": moved_from} if moved_from != parent else {})
    base = "" if parent is None else whole[parent]
    return ForeignNode(
        key, parent, whole[key][len(base):], author=AUTHORS.get(item.get("type")),
        created=epoch(item.get("timestamp")), meta=meta,
        generation={"model": model} if isinstance(model, str) and model else None,
        extensions={NAMESPACE: rest},
    )  # fmt: skip
