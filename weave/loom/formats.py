"""A loom as JSON: the one export format, written and read back exactly.

"lloom-loom", version 1 (no release shipped another): every node with all its fields (its
`provenance` may be left out: a file written before it was kept reads as unknown), the
cursor, the checked-out children, the bookmarks, the story's title and settings, and the
suggestions kept per node (`loom_document` writes it, `read_document` reads it).

Reading trusts nothing: the file is parsed with a bound on its size and nesting
(`MAX_BYTES`, `MAX_DEPTH`), its integers must fit 64 bits, no object may hold a key
twice (`bounded_json`, which other tools' files are read with too), and each number is checked
where it enters: times since the epoch, scores within `MAX_SCORE`, token ids in
0..`TOKEN_ID_LIMIT` (whether a model has them is `weave.story.token_ids.usable`'s to
check). Suggestions or settings holding NaN or an infinity are not kept (`finite_only`).
Pure: no files, no SQLite. Every problem with a document is a `ValueError` saying what is wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

from weave.finite import non_finite
from weave.loom.loom import KINDS, Loom, Node
from weave.loom.provenance import Provenance

LOOM_FORMAT = "lloom-loom"
LOOM_VERSION = 1
MAX_BYTES = 256 << 20  # a loom of a million nodes fits; a device like /dev/zero does not
MAX_DEPTH = 64  # a loom document nests about 8 deep; Python's own limit is near 1,000
MAX_SCORE = 1e9  # a sum of log-probabilities (or of probabilities) is far inside it
MAX_TIME = 1e11  # seconds since the epoch: the year 5138
TOKEN_ID_LIMIT = 1 << 31  # no vocabulary is larger
_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NODE_FIELDS = ("id", "parent", "text", "kind", "token_ids", "model", "params", "score", "created")
_OPTIONAL_FIELDS = ("provenance",)  # a file written before provenance was kept has none


@dataclass(frozen=True)
class SavedStory:
    """A loom and what goes with it, as a document holds them."""

    loom: Loom
    title: str | None = None  # None: the story's first words
    created: float = 0.0
    settings: dict = field(default_factory=dict)
    suggestions: dict[str, dict] = field(default_factory=dict)  # node id -> search dict
    updated: float = 0.0  # its last change (an import's own is not kept: it is new here)


def loom_document(story_id: str, story: SavedStory) -> str:
    """The story as "lloom-loom" JSON (ASCII)."""
    loom = story.loom
    nodes = [node_dict(n) for n in loom.nodes.values()]
    doc = {"format": LOOM_FORMAT, "version": LOOM_VERSION, "id": story_id, "title": story.title,
           "created": story.created, "updated": story.updated, "settings": story.settings,
           "root": loom.root, "cursor": loom.cursor, "checkouts": dict(loom.checkouts),
           "bookmarks": sorted(loom.bookmarks), "nodes": nodes,
           "suggestions": story.suggestions}  # fmt: skip
    return json.dumps(doc, ensure_ascii=True, indent=1, allow_nan=False)


def node_dict(node: Node) -> dict:
    """A node as a "lloom-loom" file holds it (`read_node` reads it back)."""
    item = {name: getattr(node, name) for name in _NODE_FIELDS}
    return item | {"provenance": None if node.provenance is None else node.provenance.to_dict()}


def finite_only(story: SavedStory) -> SavedStory:
    """`story` less its suggestions that hold NaN or an infinity, and its settings if they
    do: JSON cannot hold them and a page cannot draw them."""
    suggestions = {n: data for n, data in story.suggestions.items() if non_finite(data) is None}
    settings = story.settings if non_finite(story.settings) is None else {}
    return replace(story, suggestions=suggestions, settings=settings)


def read_document(data: str | bytes) -> SavedStory:
    """A story from a "lloom-loom" file."""
    doc = bounded_json(data)
    if not isinstance(doc, dict) or doc.get("format") != LOOM_FORMAT:
        raise ValueError(f'it is not a LLooM file (no "format": "{LOOM_FORMAT}")')
    try:
        return _read_loom(doc)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"a {LOOM_FORMAT} file with a missing or wrong value ({e!r})") from e


class _Refused(ValueError):
    """A value `json.loads` met that the file may not hold; its message is the reason."""


def bounded_json(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """`data` parsed as JSON, when it is at most `MAX_BYTES` long, nests at most `max_depth`
    deep (counted on the brackets outside strings first, at C speed, so no input can exhaust
    the stack), its integers fit 64 bits (signed or unsigned: a seed may be a uint64) and no
    object holds a key twice (which one counts is a guess: a node would be lost); else a
    ValueError saying which it breaks."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise ValueError(f"it is longer than {MAX_BYTES >> 20} MiB")
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")  # every '"' now delimits
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_BRACKET)
    if brackets and max(accumulate(map(_STEP.__getitem__, brackets))) > max_depth:
        raise ValueError(f"it is nested deeper than {max_depth} levels")
    try:
        return json.loads(data, parse_int=_int64, object_pairs_hook=_unique)
    except RecursionError as e:  # unbalanced brackets the count above could not see
        raise ValueError(f"it is nested deeper than {max_depth} levels") from e
    except _Refused as e:
        raise ValueError(str(e)) from None
    except (ValueError, TypeError) as e:
        raise ValueError(f"it is not JSON ({e})") from e


def _int64(digits: str) -> int:
    value = int(digits)
    if not -(1 << 63) <= value < 1 << 64:
        raise _Refused(f"the number {digits[:24]}… does not fit 64 bits")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Refused(f"it holds the key {twice[:80]!r} twice in one object")
    return obj


def _read_loom(doc: dict) -> SavedStory:
    if doc.get("version") != LOOM_VERSION:
        raise ValueError(
            f"a {LOOM_FORMAT} file of version {doc.get('version')!r}; this LLooM reads "
            f"version {LOOM_VERSION}: upgrade LLooM"
        )
    nodes: dict[str, Node] = {}
    for item in _list(doc["nodes"]):
        node = read_node(item)
        if node.id in nodes:
            raise ValueError(f"node {node.id!r} appears twice")
        first = not nodes
        if (node.parent is None) != first or not (first or node.parent in nodes):
            raise ValueError(f"node {node.id!r} does not come after its parent")
        nodes[node.id] = node
    root = next(iter(nodes.values()), None)
    if root is None or root.text or root.id != doc["root"]:
        raise ValueError("its first node must be the root, with no text")
    checkouts, marks = doc["checkouts"], doc["bookmarks"]
    named = [doc["cursor"], *checkouts.keys(), *checkouts.values(), *_list(marks)]
    if not all(isinstance(n, str) and n in nodes for n in named):
        raise ValueError("its cursor, checkouts or bookmarks name a node it does not hold")
    suggestions = doc["suggestions"]
    if not all(k in nodes and isinstance(v, dict) for k, v in suggestions.items()):
        raise ValueError("its suggestions must be objects kept under nodes it holds")
    loom = Loom(nodes, root.id, doc["cursor"], dict(checkouts), frozenset(marks))
    settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
    title = doc.get("title")  # kept when it has a visible character
    title = without_surrogates(title) if isinstance(title, str) and title.strip() else None
    return SavedStory(loom, title, _time(doc["created"]), settings, dict(suggestions))


def read_node(item: Any) -> Node:
    """A node from its "lloom-loom" form; a ValueError says what is wrong with it."""
    if not isinstance(item, dict) or not set(_NODE_FIELDS) <= set(item) <= {
        *_NODE_FIELDS,
        *_OPTIONAL_FIELDS,
    }:
        raise ValueError(f"a node must be an object with {', '.join(_NODE_FIELDS)}")
    if not all(isinstance(item[k], str) for k in ("id", "text", "kind")):
        raise ValueError("a node's id, text and kind are strings")
    ids, score, params, name = item["token_ids"], item["score"], item["params"], item["id"]
    if ids is not None and not all(type(i) is int and 0 <= i < TOKEN_ID_LIMIT for i in _list(ids)):
        raise ValueError(f"node {name!r} has token ids that are not non-negative ints below 2**31")
    if score is not None and not (type(score) in (int, float) and abs(score) <= MAX_SCORE):
        raise ValueError(f"node {name!r} has a score that is not a number within ±{MAX_SCORE:g}")
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"node {name!r} has params that are not an object")
    if item["model"] is not None and not isinstance(item["model"], str):
        raise ValueError(f"node {name!r} has a model that is not a string")
    if item["kind"] not in KINDS:
        raise ValueError(f"node {name!r} has an unknown kind {item['kind']!r}")
    made = item.get("provenance")
    return Node(
        item["id"], item["parent"], item["text"], item["kind"],
        None if ids is None else tuple(ids), item["model"], params,
        None if score is None else float(score), _time(item["created"]),
        None if made is None else Provenance.from_dict(made),
    )  # fmt: skip


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise ValueError(f"{value!r:.40} is not a list")
    return value


def _time(value: Any) -> float:
    if not (type(value) in (int, float) and 0 <= value <= MAX_TIME):
        raise ValueError(f"a time must be seconds since the epoch, not {value!r}")
    return float(value)


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate (a code point UTF-8 cannot hold) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)
