"""socketteer/loom (the original Python loom): read only.

A tree of nested nodes: `{"root": {text, children: [...], id, meta, tags, ...}, "chapters",
"canonical", "memories", "summaries", "model_responses", "selected_node_id", ...}` (its
loader also takes a bare node or a list of them: several roots). Children keep their
order; `meta.source` AI/prompt/mixed is the author; `meta.creation_timestamp` the time; a
"bookmark" tag bookmarks the node and every tag is kept in `meta.tags`; a generation's
model comes from `model_responses`. The UI state (`visited`, `open`, `mutable`,
`text_attributes`...) and the story's chapters, memories and summaries are kept in
`extensions["socketteer-loom"]`. Nesting is walked with a stack, never recursion.
"""

from __future__ import annotations

from typing import Any

from weave.interop import foreign

NAME = "socketteer loom"
NAMESPACE = "socketteer-loom"
SOURCES = {"AI": "model", "prompt": "human", "mixed": "mixed"}
_KNOWN = {"id", "text", "children", "parent_id", "tags"}
STORY_FIELDS = ("chapters", "memories", "summaries")  # the file's parts a writer wrote


def detect(doc: Any) -> bool:
    root = doc.get("root") if isinstance(doc, dict) else None
    return (
        _is_node(root)
        or _is_node(doc)
        or (isinstance(doc, list) and bool(doc) and all(map(_is_node, doc)))
    )


def _is_node(item: Any) -> bool:
    return isinstance(item, dict) and "text" in item and "children" in item


def read(doc: Any) -> foreign.ForeignTree:
    top = doc if isinstance(doc, dict) and "root" in doc else {"root": doc}
    roots = top["root"] if isinstance(top["root"], list) else [top["root"]]
    responses = top.get("model_responses") if isinstance(top.get("model_responses"), dict) else {}
    nodes, minted = [], 0
    stack = [(foreign.object_of(r, "a root"), None) for r in reversed(roots)]
    while stack:
        item, parent = stack.pop()
        if "id" in item:
            made_id = foreign.node_id(item["id"], "a node's id")
        else:
            minted += 1
            made_id = f"socketteer-{minted}"
        nodes.append(_node(made_id, parent, item, responses))
        children = foreign.list_of(item.get("children", []), f"node {made_id!r}: children")
        stack += [
            (foreign.object_of(c, f"a child of {made_id!r}"), made_id) for c in reversed(children)
        ]
    rest = foreign.others(top, {"root", "selected_node_id"})
    selected = top.get("selected_node_id")
    left_out = [_settings(rest)] if rest else []
    return foreign.ForeignTree(
        NAME,
        nodes,
        current=str(selected) if selected is not None else None,
        extensions={NAMESPACE: rest} if rest else {},
        left_out=left_out,
    )


def _settings(rest: dict) -> str:
    """The file's fields LLooM keeps aside, as a writer reads them: the story's own first
    (chapters, memories, summaries), then how many of the app's settings."""
    own = [name for name in STORY_FIELDS if name in rest]
    settings = len(rest) - len(own)
    said = own + ([f"{settings} of the app's settings"] if settings else [])
    return "its " + (", ".join(said[:-1]) + " and " if len(said) > 1 else "") + said[-1]


def _node(made_id: str, parent: str | None, item: dict, responses: dict) -> foreign.ForeignNode:
    meta = item.get("meta") if isinstance(item.get("meta"), dict) else {}
    tags = [t for t in item.get("tags") or () if isinstance(t, str)]
    generation = meta.get("generation") if isinstance(meta.get("generation"), dict) else {}
    response = (
        responses.get(generation.get("id")) if isinstance(generation.get("id"), str) else None
    )
    model = response.get("model") if isinstance(response, dict) else None
    if model is None and isinstance(generation.get("model"), str):
        model = generation["model"]
    rest = foreign.others(item, _KNOWN)
    return foreign.ForeignNode(
        made_id,
        parent,
        foreign.text_of(item.get("text", ""), f"node {made_id!r}: text"),
        author=SOURCES.get(meta.get("source")),
        created=foreign.epoch(meta.get("creation_timestamp")),
        bookmarked="bookmark" in tags,
        meta={"tags": tags} if tags else {},
        generation={"model": model} if isinstance(model, str) else None,
        extensions={NAMESPACE: rest} if rest else {},
    )
