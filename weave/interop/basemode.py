"""basemode-loom (FergusFettes/basemode-loom): its JSON export, read only.

`{version: 1, nodes: [{id, parent_id, tree_id, kind, text, context_id, model, strategy,
max_tokens, temperature, checked_out, created_at, metadata}]}`. Nodes of kind "context"
(a system context, outside the story's text) are not part of the tree: they are kept in
`extensions["basemode-loom"]`. Siblings keep the list's order; the checked-out children
from the root lead to the current node; a node with a model is the model's, the others
the writer's; `metadata` bookmarked, rating and hidden are `meta` bookmarked, rating and
pruned; model, strategy, max tokens and temperature are the `generation`.
"""

from __future__ import annotations

from typing import Any

from weave.interop import foreign

NAME = "basemode-loom"
NAMESPACE = "basemode-loom"
_KNOWN = {"id", "parent_id", "text", "model", "strategy", "max_tokens", "temperature", "created_at"}


def detect(doc: Any) -> bool:
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    return (
        isinstance(nodes, list)
        and bool(nodes)
        and isinstance(nodes[0], dict)
        and "parent_id" in nodes[0]
    )


def read(doc: dict) -> foreign.ForeignTree:
    items = [foreign.object_of(n, "a node") for n in foreign.list_of(doc["nodes"], "its nodes")]
    contexts = [n for n in items if n.get("kind") == "context"]
    nodes = [_node(n) for n in items if n.get("kind") != "context"]
    rest = foreign.others(doc, {"nodes", "version"}) | ({"contexts": contexts} if contexts else {})
    left_out = [f"{len(contexts)} context node(s)"] if contexts else []
    return foreign.ForeignTree(
        NAME,
        nodes,
        current=_checked_out(nodes, items),
        extensions={NAMESPACE: rest} if rest else {},
        left_out=left_out,
    )


def _checked_out(nodes: list[foreign.ForeignNode], items: list[dict]) -> str | None:
    """The end of the path of checked-out children from the (first) root."""
    checked = {str(n.get("id")) for n in items if n.get("checked_out")}
    children: dict[str | None, list[str]] = {}
    for node in nodes:
        children.setdefault(node.parent, []).append(node.id)
    at = next(iter(children.get(None, [])), None)
    seen = set()
    while at is not None and at not in seen:
        seen.add(at)
        nxt = next((c for c in children.get(at, []) if c in checked), None)
        if nxt is None:
            return at
        at = nxt
    return at


def _node(item: dict) -> foreign.ForeignNode:
    key = foreign.node_id(item.get("id"), "a node's id")
    parent = item.get("parent_id")
    metadata = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
    meta = {"rating": metadata["rating"]} if type(metadata.get("rating")) is int else {}
    meta |= {"pruned": True} if metadata.get("hidden") is True else {}
    model = item.get("model")
    parameters = {
        k: item[k] for k in ("strategy", "max_tokens", "temperature") if item.get(k) is not None
    }
    generation = ({"model": model} if isinstance(model, str) else {}) | (
        {"parameters": parameters} if parameters else {}
    )
    rest = foreign.others(item, _KNOWN)
    return foreign.ForeignNode(
        key,
        None if parent is None else foreign.node_id(parent, f"node {key!r}: parent_id"),
        foreign.text_of(item.get("text", ""), f"node {key!r}: text"),
        author="human" if parent is None or not isinstance(model, str) else "model",
        created=foreign.epoch(item.get("created_at")),
        bookmarked=metadata.get("bookmarked") is True,
        meta=meta,
        generation=generation or None,
        extensions={NAMESPACE: rest} if rest else {},
    )
