"""Open Loom v2 (intrinsic-labs/aspen-grove, docs/open-loom/spec.md): read, and written.

Written (`document`): one tree, every node with its text as one text block, its author,
time, bookmark in `meta`, its provenance as `generation`, and every parent link as a
continuation edge, in sibling order. LLooM's own data (a node's kind, token ids, search
parameters, score, exact time and provenance; the story's title, checked-out children,
kept suggestions and settings with its steering) goes under `extensions["lloom"]`, so that
reading the file back gives the same story exactly. What an imported file held and LLooM
kept aside (`weave.interop.foreign.IMPORTED_KEY`: other namespaces' extensions, `meta`,
`generation` verbatim, non-text content, other edges, other trees) is written back where
it was.

Read (`read`): the first tree (the others are kept); a node's parent is the primary source
of the first continuation edge to it (the spec's rule for a strict tree); other edges,
fields and extensions are kept. A major version other than 2 is refused. What the spec
defines comes back as the file wrote it: its version ("2.1" stays), the tree's id and
`updatedAt`, an author's fields beside the role (`agentId`, `name`, `modelId`), and each
time at its own precision and zone where it is still the time LLooM holds.
"""

from __future__ import annotations

import json
import time
from typing import Any

from weave.interop.foreign import (
    IMPORTED_KEY,
    ForeignNode,
    ForeignTree,
    author_of,
    epoch,
    iso,
    list_of,
    node_id,
    object_of,
    others,
)
from weave.loom.formats import SavedStory, node_dict
from weave.loom.loom import Loom, Node

NAME = "Open Loom v2"
FORMAT = "open-loom"
VERSION = "2.0"
MEDIA_TYPE = "application/vnd.openloom+json"
LLOOM = "lloom"  # our namespace in `extensions`
ROLE_OF_KIND = {"typed": "human", "edited": "mixed", "accepted": "model", "sampled": "model"}
_DOC_FIELDS = {"format", "version", "exportedAt", "generator", "trees"}
_TREE_FIELDS = {"id", "title", "rootNodeIds", "currentNodeId", "createdAt", "updatedAt",
                "nodes", "edges", "extensions"}  # fmt: skip
_NODE_FIELDS = {"id", "content", "author", "createdAt", "meta", "generation", "extensions"}
_MADE = "madeGeneration"  # in a node's "lloom" extension: its `generation` is LLooM's own
_KEPT_AUTHOR = "keptAuthor"  # ...: its author role is another tool's, which LLooM kept
_AUTHOR_FIELDS = "authorFields"  # a kept node's: its author's fields beside the role


def detect(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("format") == FORMAT


# -- reading ------------------------------------------------------------------------------
def read(doc: dict) -> ForeignTree:
    version = doc.get("version")
    if not (isinstance(version, str) and version.split(".")[0] == "2"):
        raise ValueError(f"an Open Loom file of version {version!r}; this LLooM reads 2.x")
    trees = list_of(doc.get("trees"), "its trees")
    if not trees:
        raise ValueError("it holds no tree")
    tree = object_of(trees[0], "its first tree")
    nodes = object_of(tree.get("nodes"), "the tree's nodes")
    parents, edge_of, other_edges = _edges(list_of(tree.get("edges", []), "the tree's edges"))
    ours = isinstance(object_of(tree.get("extensions", {}), "the tree's extensions").get(LLOOM),
                      dict)  # fmt: skip
    read_nodes = [_node(key, item, parents, edge_of, ours) for key, item in nodes.items()]
    place = {target: i for i, target in enumerate(edge_of)}
    read_nodes.sort(key=lambda n: place.get(n.id, -1))  # siblings in the edges' order
    extensions = dict(object_of(tree.get("extensions", {}), "the tree's extensions"))
    lloom = extensions.pop(LLOOM, None)
    kept_doc = others(doc, _DOC_FIELDS) | ({"trees": trees[1:]} if len(trees) > 1 else {})
    kept_doc |= {"version": version} if version != VERSION else {}  # a 2.1 file stays 2.1
    kept_tree = others(tree, _TREE_FIELDS) | ({"edges": other_edges} if other_edges else {})
    if not ours:  # another tool's tree: its id, times and last change written back as they were
        kept_tree |= {k: tree[k] for k in ("id", "updatedAt") if isinstance(tree.get(k), str)}
        kept_tree |= _as_written(tree.get("createdAt"))
    if kept_tree.get("mode") == "buffer":  # LLooM's own mode: written again on export
        del kept_tree["mode"]
    left_out = [f"{len(trees) - 1} more tree(s)"] if len(trees) > 1 else []
    blocks = sum("content" in n.kept for n in read_nodes)
    left_out += [f"images or audio in {blocks} node(s)"] if blocks else []
    title = tree.get("title")
    return ForeignTree(
        NAME, read_nodes, current=tree.get("currentNodeId"),
        title=title if isinstance(title, str) and title.strip() else None,
        created=epoch(tree.get("createdAt")), extensions=extensions, left_out=left_out,
        kept={k: v for k, v in (("document", kept_doc), ("tree", kept_tree)) if v},
        lloom=lloom if isinstance(lloom, dict) else None,
    )  # fmt: skip


def _as_written(when: Any) -> dict:
    """{"createdAt": when} where LLooM would write the time `when` reads as otherwise
    (another precision, another zone): kept, so that it is written back as it was."""
    moment = epoch(when)
    return {"createdAt": when} if moment is not None and iso(moment) != when else {}


def _when(kept: Any, seconds: float) -> str:
    """A time as the file wrote it where it still is that time, else as LLooM writes it."""
    return kept if isinstance(kept, str) and epoch(kept) == seconds else iso(seconds)


def _edges(edges: list) -> tuple[dict[str, str], dict[str, dict], list]:
    """(each node's parent, the edge that made it its parent, the other edges)."""
    parents: dict[str, str] = {}
    edge_of: dict[str, dict] = {}
    other: list = []
    for i, edge in enumerate(edges):
        edge = object_of(edge, f"edge {i}")
        target, sources = edge.get("targetNodeId"), edge.get("sources")
        primary = next((s for s in sources if isinstance(s, dict)
                        and s.get("role", "primary") == "primary"), None) if isinstance(
            sources, list) else None  # fmt: skip
        if edge.get("type") != "continuation" or primary is None or target in parents:
            other.append(edge)
            continue
        target = node_id(target, f"edge {i}'s target")
        parents[target] = node_id(primary.get("nodeId"), f"edge {i}'s source")
        edge_of[target] = edge
    return parents, edge_of, other


def _node(key: str, item: Any, parents: dict, edge_of: dict, ours: bool) -> ForeignNode:
    """A node; `ours`: the tree is one LLooM wrote (its plain edges are LLooM's own)."""
    item = object_of(item, f"node {key!r}")
    blocks = list_of(item.get("content", []), f"node {key!r}: content")
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if not all(isinstance(t, str) for t in texts):
        raise ValueError(f"node {key!r} has a text block whose text is not a string")
    meta = dict(object_of(item.get("meta", {}), f"node {key!r}: meta"))
    extensions = dict(object_of(item.get("extensions", {}), f"node {key!r}: extensions"))
    lloom = extensions.pop(LLOOM, None)
    lloom = dict(lloom) if isinstance(lloom, dict) else None
    generation = item.get("generation")
    if lloom is not None and lloom.pop(_MADE, False):
        generation = None  # LLooM wrote it from the provenance the extension holds
    author = item.get("author")
    role = author_of(author.get("role")) if isinstance(author, dict) else None
    kept = others(item, _NODE_FIELDS)
    if lloom is None:  # LLooM's own node holds its exact time in the extension
        kept |= _as_written(item.get("createdAt"))
    if isinstance(author, dict) and author.keys() - {"role"}:  # agentId, name, modelId...
        kept[_AUTHOR_FIELDS] = {k: v for k, v in author.items() if k != "role"}
    if lloom is not None and lloom.pop(_KEPT_AUTHOR, False) and role:
        kept["author"] = role  # the role another tool gave, which LLooM kept
    if len(texts) != len(blocks):
        kept["content"] = blocks
    edge = edge_of.get(key)
    if edge is not None and not (ours and _plain(edge, parents[key], key)):
        kept["edge"] = edge
    return ForeignNode(
        key, parents.get(key), "".join(texts), author=role,
        created=epoch(item.get("createdAt")), bookmarked=meta.pop("bookmarked", False) is True,
        meta=meta, generation=generation if isinstance(generation, dict) else None,
        extensions=extensions, lloom=lloom, kept=kept,
    )  # fmt: skip


# -- writing ------------------------------------------------------------------------------
def document(story_id: str, story: SavedStory, *, now: float | None = None) -> str:
    """The story as an Open Loom v2 document (ASCII JSON)."""
    loom, settings = story.loom, dict(story.settings)
    record = settings.pop(IMPORTED_KEY, None) or {}
    records = record.get("nodes", {})
    synthetic = record.get("synthetic_root") == loom.root
    shown = [n for n in loom.nodes.values() if not (synthetic and n.id == loom.root)]
    roots = [n.id for n in loom.children(loom.root)] if synthetic else [loom.root]
    kept = record.get("kept", {})
    lloom = {"root": loom.root, "title": story.title, "created": story.created,
             "settings": settings, "checkouts": dict(loom.checkouts),
             "suggestions": story.suggestions}  # fmt: skip
    if synthetic:
        lloom["rootNode"] = node_dict(loom.node(loom.root))
    if "format" in record:
        lloom["source"] = record["format"]
    kept_tree = kept.get("tree", {})
    tree = {
        "mode": "buffer", **kept_tree, "id": kept_tree.get("id", story_id),
        "title": story.title or "", "rootNodeIds": roots, "currentNodeId": loom.cursor,
        "createdAt": _when(kept_tree.get("createdAt"), story.created),
        "updatedAt": kept_tree.get("updatedAt") or iso(story.updated or story.created),
        "nodes": {n.id: _written(n, loom, records.get(n.id, {})) for n in shown},
        "edges": _edges_of([n for n in shown if n.parent is not None and not (
            synthetic and n.parent == loom.root)], records, loom),
        "extensions": {**record.get("extensions", {}), LLOOM: lloom},
    }  # fmt: skip
    tree["edges"] += kept_tree.get("edges", [])
    kept_doc = kept.get("document", {})
    doc = {**kept_doc, "format": FORMAT, "version": kept_doc.get("version", VERSION),
           "exportedAt": iso(time.time() if now is None else now),
           "generator": {"name": "LLooM"}, "trees": [tree, *kept_doc.get("trees", [])]}  # fmt: skip
    return json.dumps(doc, ensure_ascii=True, indent=1, allow_nan=False)


def _written(node: Node, loom: Loom, record: dict) -> dict:
    own = {k: v for k, v in node_dict(node).items() if k not in ("id", "parent", "text")}
    made = node.provenance
    if "generation" in record:
        generation = record["generation"]
    else:
        generation = _generation(node)
        own |= {_MADE: True} if generation else {}
    content = record.get("content")
    joined = "".join(b.get("text", "") for b in content or () if b.get("type") == "text")
    role = record.get("author") or (made and made.author) or ROLE_OF_KIND[node.kind]
    own |= {_KEPT_AUTHOR: True} if "author" in record else {}
    mapped = ("author", _AUTHOR_FIELDS, "meta", "generation", "extensions", "content", "edge")
    written = {k: v for k, v in record.items() if k not in mapped}
    written |= {
        "id": node.id,
        "content": content if content and joined == node.text else [
            {"type": "text", "text": node.text}],
        "author": {"role": role, **record.get(_AUTHOR_FIELDS, {})},
        "createdAt": _when(record.get("createdAt"), node.created),
        "meta": {"bookmarked": node.id in loom.bookmarks, **record.get("meta", {})},
        "extensions": {**record.get("extensions", {}), LLOOM: own},
    }  # fmt: skip
    return written | ({"generation": generation} if generation else {})


def _generation(node: Node) -> dict:
    """Open Loom's `generation` from what LLooM knows of how a model made `node`."""
    made = node.provenance
    found = {"parameters": node.params}
    if made is not None:
        asked = None if made.requested is None else iso(made.requested)
        found |= {"provider": made.backend, "model": made.model, "latencyMs": made.latency_ms,
                  "requestedAt": asked}  # fmt: skip
    return {k: v for k, v in found.items() if v is not None}


def _edges_of(nodes: list[Node], records: dict, loom: Loom) -> list[dict]:
    """The edge to each of `nodes` from its parent: the file's own where LLooM kept it,
    else LLooM's, whose id is no node's and no other edge's (they share one scope)."""
    kept = {n.id: e for n in nodes if _kept_edge(e := records.get(n.id, {}).get("edge"), n)}
    taken = set(loom.nodes) | {e.get("id") for e in kept.values()}
    edges = []
    for node in nodes:
        if node.id in kept:
            edges.append(kept[node.id])
            continue
        edge_id = f"e-{node.id}"
        while edge_id in taken:
            edge_id = f"e-{edge_id}"
        taken.add(edge_id)
        edges.append({"id": edge_id, "type": "continuation",
                      "sources": [{"nodeId": node.parent, "role": "primary"}],
                      "targetNodeId": node.id})  # fmt: skip
    return edges


def _kept_edge(edge: Any, node: Node) -> bool:
    """Whether `edge`, kept from the file, still links `node` to its parent."""
    if not isinstance(edge, dict) or edge.get("targetNodeId") != node.id:
        return False
    sources = edge.get("sources") if isinstance(edge.get("sources"), list) else []
    primary = next((s for s in sources if isinstance(s, dict)
                    and s.get("role", "primary") == "primary"), {})  # fmt: skip
    return primary.get("nodeId") == node.parent


def _plain(edge: dict, parent: str, child: str) -> bool:
    """Whether `edge` is as LLooM writes one: nothing in it but the link and an id."""
    return (set(edge) == {"id", "type", "sources", "targetNodeId"}
            and edge["type"] == "continuation" and str(edge["id"]).startswith("e-")
            and edge["sources"] == [{"nodeId": parent, "role": "primary"}]
            and edge["targetNodeId"] == child)  # fmt: skip
