"""ExoLoom: read only.

`{tree: {nodes: {id: {content, parentId, childrenIds, ...}}, rootNodeId}, lens: {bookmarks,
prunedNodes, ...}}`. Children keep the order of their parent's `childrenIds`; a bookmark
(an id, or an id with a label) bookmarks the node; a pruned node is marked `meta.pruned`
(it is still imported: LLooM hides nothing). A node's author is its `author` or `role`
when it has one. The other fields of nodes, tree and lens go to `extensions["exoloom"]`.
"""

from __future__ import annotations

from typing import Any

from weave.interop import foreign

NAME = "ExoLoom"
NAMESPACE = "exoloom"
_KNOWN = {"id", "content", "parentId", "childrenIds", "author", "role"}


def detect(doc: Any) -> bool:
    tree = doc.get("tree") if isinstance(doc, dict) else None
    return isinstance(tree, dict) and isinstance(tree.get("nodes"), dict) and "rootNodeId" in tree


def read(doc: dict) -> foreign.ForeignTree:
    tree = doc["tree"]
    lens = foreign.object_of(doc.get("lens", {}), "its lens")
    labels = _bookmarks(lens.get("bookmarks", []))
    pruned = set(map(str, foreign.list_of(lens.get("prunedNodes", []), "the lens's prunedNodes")))
    items = foreign.object_of(tree["nodes"], "its nodes")
    rank = {}
    for item in items.values():
        for i, child in enumerate(item.get("childrenIds") or () if isinstance(item, dict) else ()):
            rank.setdefault(str(child), i)
    nodes = [
        _node(k, foreign.object_of(v, f"node {k!r}"), labels, pruned) for k, v in items.items()
    ]
    nodes.sort(key=lambda n: rank.get(n.id, -1))
    rest = foreign.others(doc, {"tree", "lens"}) | foreign.others(tree, {"nodes", "rootNodeId"})
    rest |= (
        {"lens": foreign.others(lens, {"bookmarks", "prunedNodes"})}
        if foreign.others(lens, {"bookmarks", "prunedNodes"})
        else {}
    )
    current = lens.get("currentNodeId", tree.get("currentNodeId"))
    return foreign.ForeignTree(
        NAME,
        nodes,
        current=current if isinstance(current, str) else None,
        extensions={NAMESPACE: rest} if rest else {},
    )


def _bookmarks(value: Any) -> dict[str, str]:
    """{node id: label ("" when none)} from a list of ids, of {nodeId, label}, or a map."""
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) else "" for k, v in value.items()}
    marks = {}
    for mark in foreign.list_of(value, "the lens's bookmarks"):
        if isinstance(mark, dict):
            label = mark.get("label", mark.get("title", ""))
            marks[foreign.node_id(mark.get("nodeId", mark.get("id")), "a bookmark")] = (
                label if isinstance(label, str) else ""
            )
        else:
            marks[foreign.node_id(mark, "a bookmark")] = ""
    return marks


def _node(key: str, item: dict, labels: dict, pruned: set) -> foreign.ForeignNode:
    parent = item.get("parentId")
    meta = {"bookmarkLabel": labels[key]} if labels.get(key) else {}
    meta |= {"pruned": True} if key in pruned else {}
    rest = foreign.others(item, _KNOWN)
    return foreign.ForeignNode(
        key,
        None if parent is None else foreign.node_id(parent, f"node {key!r}: parentId"),
        foreign.text_of(item.get("content", item.get("text", "")), f"node {key!r}: content"),
        author=foreign.author_of(item.get("author", item.get("role"))),
        created=foreign.epoch(item.get("createdAt", item.get("timestamp"))),
        bookmarked=key in labels,
        meta=meta,
        extensions={NAMESPACE: rest} if rest else {},
    )
