"""Another loom tool's tree, read into one shape, and made into a LLooM story.

Each format's reader (`weave.interop.<format>`) turns its file into a `ForeignTree`: nodes
with their own text and parent, in an order where siblings keep the file's order, plus
what the format says of each (author, time, bookmark, Open Loom `meta` and `generation`)
and what LLooM has no place for, under the format's `extensions` namespace. `build` checks
the tree (every id once, every parent present, no cycle), puts an empty root above it when
it has several roots or its root holds text (a LLooM root holds none), and returns the
story as a "lloom-loom" document would hold it, so that `weave.loom_formats` checks every
value the way it checks LLooM's own files; a story whose document would pass `MAX_BYTES`
is refused as such (LLooM could not read its own export of it back), before its nodes are
made where their count and texts alone pass it.

What LLooM cannot show (extensions, `meta`, `generation`, non-text content, the tree's own
fields) is kept in the story's settings under `IMPORTED_KEY`: `weave.interop.openloom`
writes it back on export, so an Open Loom file from elsewhere keeps its extensions.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from weave.loom.formats import MAX_BYTES, MAX_TIME, SavedStory, read_document
from weave.loom.loom import new_id
from weave.loom.provenance import AUTHORS, Provenance
from weave.story.steering import Steering, with_steering

IMPORTED_KEY = "imported"  # the story's settings key for what LLooM keeps but cannot show
NODE_BYTES = 200  # the least a node takes in a LLooM file beside its text and ids (some 210)
KIND_OF_AUTHOR = {"human": "typed", "model": "accepted", "mixed": "edited", "system": "typed"}


@dataclass
class ForeignNode:
    """One node as another tool's file holds it; `text` is the node's own text."""

    id: str
    parent: str | None
    text: str
    author: str | None = None  # one of AUTHORS, when the file says
    created: float | None = None  # seconds since the epoch, when the file says
    bookmarked: bool = False
    meta: dict = field(default_factory=dict)  # Open Loom `meta` beyond `bookmarked`
    generation: dict | None = None  # Open Loom `generation`, kept as the file holds it
    extensions: dict = field(default_factory=dict)  # {namespace: what LLooM cannot show}
    lloom: dict | None = None  # LLooM's own fields of a node LLooM exported
    kept: dict = field(default_factory=dict)  # the node's other Open Loom fields, verbatim


@dataclass
class ForeignTree:
    """A whole file's tree, and what its reader could not carry (`left_out`, for the
    writer: each is kept in the extensions unless it says otherwise)."""

    format: str  # the format's name as the page says it
    nodes: list[ForeignNode]  # siblings in the file's order
    current: str | None = None
    title: str | None = None
    created: float | None = None
    steering: Steering | None = None
    extensions: dict = field(default_factory=dict)  # the tree's, {namespace: ...}
    left_out: list[str] = field(default_factory=list)
    kept: dict = field(default_factory=dict)  # Open Loom fields kept verbatim (tree, document)
    lloom: dict | None = None  # LLooM's own story fields, from a tree LLooM exported


@dataclass(frozen=True)
class Imported:
    """A story read from a file: which format it was, and what it could not carry."""

    story: SavedStory
    format: str
    left_out: tuple[str, ...] = ()

    def message(self) -> str:
        """One line for the writer: the format found, and what was kept aside."""
        said = f"Imported as {self.format}."
        if self.left_out:
            said += " Kept aside (LLooM cannot show them): " + "; ".join(self.left_out) + "."
        return said


def build(tree: ForeignTree) -> Imported:
    """The story `tree` holds, open at its current node (else at the end of its first
    branch). Raises ValueError naming a duplicate id, a missing parent
    (an orphan) or a cycle."""
    if not tree.nodes:
        raise ValueError("it holds no nodes")
    least = sum(len(n.text) + 2 * len(n.id) for n in tree.nodes) + NODE_BYTES * len(tree.nodes)
    if least > MAX_BYTES:  # said before the nodes are made: they would take a while
        raise ValueError(_too_large(len(tree.nodes)))
    by_id: dict[str, ForeignNode] = {}
    for node in tree.nodes:
        if node.id in by_id:
            raise ValueError(f"node id {node.id!r} appears twice")
        by_id[node.id] = node
    for node in tree.nodes:
        if node.parent is not None and node.parent not in by_id:
            raise ValueError(f"node {node.id!r} names a parent {node.parent!r} the file does "
                             "not hold (an orphan)")  # fmt: skip
    ordered = _parents_first(tree.nodes, by_id)
    roots = [n for n in ordered if n.parent is None]
    story_root = (tree.lloom or {}).get("root")
    if len(roots) == 1 and not roots[0].text and story_root in (None, roots[0].id):
        root_id, synthetic = roots[0].id, None
    else:
        root_id = story_root if isinstance(story_root, str) and story_root not in by_id else None
        root_id = synthetic = root_id or _fresh_id(by_id)
    nodes = [] if synthetic is None else [_synthetic_root(root_id, tree)]
    nodes += [_native(n, n.parent or synthetic, tree) for n in ordered]
    current = tree.current if tree.current in by_id else _first_leaf(ordered, root_id)
    doc = {"format": "lloom-loom", "version": 1, "id": "", "title": tree.title,
           "created": _time_or_now(tree.created), "settings": {}, "root": root_id,
           "cursor": current, "checkouts": {}, "suggestions": {},
           "bookmarks": [n.id for n in ordered if n.bookmarked], "nodes": nodes}  # fmt: skip
    if tree.lloom is not None:
        doc |= {k: tree.lloom[k] for k in ("title", "created", "settings", "checkouts",
                                             "suggestions") if k in tree.lloom}  # fmt: skip
    settings = dict(doc["settings"]) if isinstance(doc["settings"], dict) else {}
    if tree.steering is not None:
        settings = with_steering(settings, tree.steering)
    record = _record(tree, ordered, synthetic)
    doc["settings"] = settings | ({IMPORTED_KEY: record} if record else {})
    document = json.dumps(doc, allow_nan=False)  # ASCII: as many bytes as characters
    if len(document) > MAX_BYTES:
        raise ValueError(_too_large(len(nodes)))
    story = read_document(document)
    return Imported(story, tree.format, tuple(tree.left_out))


def _too_large(nodes: int) -> str:
    return (f"the story it holds ({nodes:,} nodes) would be longer than {MAX_BYTES >> 20} MiB "
            "as a LLooM file, which LLooM could not read back")  # fmt: skip


def _parents_first(nodes: list[ForeignNode], by_id: dict) -> list[ForeignNode]:
    """The nodes with each parent before its children, siblings in the file's order: the
    file's own order when it is so, else a walk from the roots (a node it cannot reach
    is in a cycle)."""
    seen: set[str] = set()
    for node in nodes:
        if node.parent is not None and node.parent not in seen:
            break
        seen.add(node.id)
    else:
        return list(nodes)
    children: dict[str | None, list[ForeignNode]] = {}
    for node in nodes:
        children.setdefault(node.parent, []).append(node)
    ordered, stack = [], list(reversed(children.get(None, [])))
    while stack:
        node = stack.pop()
        ordered.append(node)
        stack += reversed(children.get(node.id, []))
    if len(ordered) < len(nodes):
        reached = {n.id for n in ordered}
        looped = [n.id for n in nodes if n.id not in reached][:3]
        raise ValueError(f"nodes {', '.join(map(repr, looped))} form a cycle: each is its own "
                         "ancestor")  # fmt: skip
    return ordered


def _first_leaf(nodes: list[ForeignNode], root_id: str) -> str:
    """Where a file that names no current node opens: down the first children to a leaf."""
    first: dict[str | None, str] = {}
    for node in nodes:
        first.setdefault(node.parent, node.id)
    at = first.get(None, root_id)
    while at in first:
        at = first[at]
    return at


def _synthetic_root(root_id: str, tree: ForeignTree) -> dict:
    """The empty root put above the file's roots: as LLooM exported it, else a new one."""
    exported = (tree.lloom or {}).get("rootNode")
    if isinstance(exported, dict):
        return {**exported, "id": root_id, "parent": None, "text": ""}
    return _native(ForeignNode(root_id, None, ""), None, tree)


def _fresh_id(taken: dict) -> str:
    while (made := new_id()) in taken:
        pass
    return made


def _native(node: ForeignNode, parent: str | None, tree: ForeignTree) -> dict:
    """The node as a "lloom-loom" file holds it: LLooM's own fields when LLooM exported it,
    else made from what the file says (its provenance: imported, from `tree.format`)."""
    if node.lloom is not None:
        return {**node.lloom, "id": node.id, "parent": parent, "text": node.text}
    made = Provenance("imported", source=tree.format, author=node.author, **_generated(node))
    return {"id": node.id, "parent": parent, "text": node.text,
            "kind": KIND_OF_AUTHOR.get(node.author or "human", "typed"), "token_ids": None,
            "model": None, "params": None, "score": None, "created": _time_or_now(node.created),
            "provenance": made.to_dict()}  # fmt: skip


def _generated(node: ForeignNode) -> dict:
    """The provenance fields an Open Loom `generation` gives (a value of the wrong type is
    left out: the `generation` itself is kept as it was)."""
    gen = node.generation or {}
    found = {"backend": gen.get("provider"), "model": gen.get("model"),
             "latency_ms": gen.get("latencyMs"),
             "requested": epoch(gen.get("requestedAt"))}  # fmt: skip
    ok = {"backend": str, "model": str, "latency_ms": (int, float), "requested": float}
    return {k: v for k, v in found.items() if isinstance(v, ok[k]) and _fits(v)}


def _fits(value: Any) -> bool:
    return isinstance(value, str) or (math.isfinite(value) and 0 <= value < 1e15)


def _record(tree: ForeignTree, nodes: list[ForeignNode], synthetic: str | None) -> dict:
    """What LLooM keeps of the file but cannot show, or {} when there is nothing."""
    per_node = {}
    for n in nodes:
        kept = dict(n.kept)
        kept |= {"author": n.author} if n.author and n.lloom is None else {}
        kept |= {"meta": n.meta} if n.meta else {}
        kept |= {"generation": n.generation} if n.generation is not None else {}
        kept |= {"extensions": n.extensions} if n.extensions else {}
        if kept:
            per_node[n.id] = kept
    source = (tree.lloom or {}).get("source", tree.format)  # a file LLooM wrote: its origin
    record = {"format": source, "nodes": per_node, "extensions": tree.extensions,
              "kept": tree.kept, "synthetic_root": synthetic}  # fmt: skip
    record = {k: v for k, v in record.items() if v}
    return {} if set(record) <= {"format"} else record


def kept_aside(settings: dict) -> dict:
    """The part of a story's settings that holds what an import kept aside ({} if none):
    the page's search settings replace the others, never this."""
    return {IMPORTED_KEY: settings[IMPORTED_KEY]} if IMPORTED_KEY in settings else {}


def node_notes(settings: dict) -> dict[str, str]:
    """What an import kept of each node that a writer reads (its bookmark's label, tags,
    rating, note), one line a node, by node id."""
    kept = settings.get(IMPORTED_KEY)
    nodes = kept.get("nodes") if isinstance(kept, dict) else None
    notes = {}
    for node_id, record in (nodes if isinstance(nodes, dict) else {}).items():
        meta = record.get("meta") if isinstance(record, dict) else None
        if not isinstance(meta, dict):
            continue
        label, tags, rating, note = (meta.get(k) for k in ("bookmarkLabel", "tags", "rating",
                                                            "note"))  # fmt: skip
        said = [f"🔖 {label}" if isinstance(label, str) else "",
                " ".join(f"#{t}" for t in tags if isinstance(t, str))
                if isinstance(tags, list) else "",
                f"rated {rating:+d}" if type(rating) is int else "",
                note if isinstance(note, str) else ""]  # fmt: skip
        if line := " · ".join(filter(None, said)):
            notes[node_id] = line
    return notes


def epoch(value: Any, *, swift: bool = False) -> float | None:
    """A time as seconds since the epoch: an ISO-8601 string, or a number (seconds;
    milliseconds when it is too large for seconds; `swift`: seconds since 2001-01-01).
    None when it cannot be read or is out of range: a time is never guessed."""
    if isinstance(value, str):
        try:
            seconds = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            return None
    elif type(value) in (int, float) and math.isfinite(value):
        seconds = value + (978307200 if swift else 0)
        seconds = seconds / 1000 if seconds > MAX_TIME else seconds
    else:
        return None
    return float(seconds) if 0 <= seconds <= MAX_TIME else None


def _time_or_now(value: float | None) -> float:
    return time.time() if value is None else value


def iso(seconds: float) -> str:
    """Seconds since the epoch as Open Loom writes a time (UTC, milliseconds)."""
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def text_of(value: Any, what: str) -> str:
    """`value` when it is a string; else a ValueError naming `what`."""
    if not isinstance(value, str):
        raise ValueError(f"{what} is not a string ({type(value).__name__})")
    return value


def object_of(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object ({type(value).__name__})")
    return value


def list_of(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list ({type(value).__name__})")
    return value


def node_id(value: Any, what: str) -> str:
    """An id as text: a string, or an integer as some tools write them."""
    if isinstance(value, str) and value:
        return value
    if type(value) is int:
        return str(value)
    raise ValueError(f"{what} is not an id (a non-empty string or an integer)")


def author_of(role: Any) -> str | None:
    return role if role in AUTHORS else None


def others(item: dict, known: set[str]) -> dict:
    """The fields of `item` a reader did not map: they go to the format's extensions."""
    return {k: v for k, v in item.items() if k not in known}
