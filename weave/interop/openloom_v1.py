"""Open Loom v1 (the Loom Swift prototype's `LoomTree`): read only.

`{id, title, rootNodeId, currentNodeId, nodes: {id: {text, author, modelId, createdTime,
parentId, childrenIds, isBookmarked, bookmarkTitle}}, bookmarkedNodes}`. Children keep the
order of their parent's `childrenIds`; `author` user/assistant/system is human/model/system;
a numeric time counts seconds from 2001-01-01 (Swift's reference date); `modelId` becomes
the provenance's model. The redundant `bookmarkedNodes` map is ignored, as the Open Loom v2
spec (§ 8.1) says; other fields go to `extensions["open-loom-v1"]`. A node is one message
of a chat, so the story reads them as turns: a message after one with text begins with
`TURN` (a blank line) unless whitespace already stands between them.
"""

from __future__ import annotations

from typing import Any

from weave.interop.foreign import (
    ForeignNode,
    ForeignTree,
    epoch,
    node_id,
    object_of,
    others,
    text_of,
)

NAME = "Open Loom v1"
TURN = "\n\n"  # what stands between two messages of a chat, read as a story
NAMESPACE = "open-loom-v1"
ROLES = {"user": "human", "human": "human", "assistant": "model", "model": "model",
         "system": "system"}  # fmt: skip
_KNOWN = {"id", "text", "content", "author", "modelId", "createdTime", "parentId",
          "childrenIds", "isBookmarked", "bookmarkTitle"}  # fmt: skip


def detect(doc: Any) -> bool:
    return (isinstance(doc, dict) and "format" not in doc and isinstance(doc.get("nodes"), dict)
            and "rootNodeId" in doc and "bookmarkedNodes" in doc)  # fmt: skip


def read(doc: dict) -> ForeignTree:
    items = object_of(doc["nodes"], "its nodes")
    nodes = [_node(key, object_of(item, f"node {key!r}")) for key, item in items.items()]
    rank = {}
    for item in items.values():
        for i, child in enumerate(item.get("childrenIds") or ()):
            rank.setdefault(str(child), i)
    nodes.sort(key=lambda n: rank.get(n.id, -1))
    _turns(nodes)
    title = doc.get("title")
    tree_rest = others(doc, {"id", "title", "rootNodeId", "currentNodeId", "nodes",
                             "bookmarkedNodes"})  # fmt: skip
    return ForeignTree(NAME, nodes, current=doc.get("currentNodeId"),
                       title=title if isinstance(title, str) and title.strip() else None,
                       extensions={NAMESPACE: tree_rest} if tree_rest else {})  # fmt: skip


def _turns(nodes: list[ForeignNode]) -> None:
    """Each message that follows one with text, with nothing blank between the two, begins
    with TURN: the turns of a chat do not run together ("…going on" "Hi!…")."""
    texts = {node.id: node.text for node in nodes}  # as the file has them
    for node in nodes:
        before = texts.get(node.parent, "")
        if before and node.text and not before[-1].isspace() and not node.text[0].isspace():
            node.text = TURN + node.text


def _node(key: str, item: dict) -> ForeignNode:
    text = item.get("text", item.get("content", ""))
    parent = item.get("parentId")
    model = item.get("modelId")
    label = item.get("bookmarkTitle")
    rest = others(item, _KNOWN)
    return ForeignNode(
        key, None if parent is None else node_id(parent, f"node {key!r}: parentId"),
        text_of(text, f"node {key!r}: text"), author=ROLES.get(item.get("author")),
        created=epoch(item.get("createdTime"), swift=True),
        bookmarked=item.get("isBookmarked") is True,
        meta={"bookmarkLabel": label} if isinstance(label, str) and label else {},
        generation={"model": model} if isinstance(model, str) else None,
        extensions={NAMESPACE: rest} if rest else {},
    )  # fmt: skip
