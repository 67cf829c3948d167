"""Loomsidian (cosmicoptima/loom, the Obsidian plugin): read only.

A note's state, `{current, hoisted, searchTerm, nodes: {id: {text, parentId, collapsed,
unread, bookmarked, lastVisited, searchResultState}}, generating}`, as its "export" writes
it; or the plugin's whole `data.json` (`{settings, state: {note path: note state}}`), whose
first note is read and whose other notes are kept. Its settings are not kept: they hold
API keys. Siblings keep the map's order (the plugin has no other); no author is recorded,
so the root is the writer's and the others "mixed" (the Open Loom v2 spec's advice, § 8.3).
The UI state goes to `extensions["loomsidian"]`.
"""

from __future__ import annotations

from typing import Any

from weave.interop.foreign import ForeignNode, ForeignTree, node_id, object_of, others, text_of

NAME = "Loomsidian"
NAMESPACE = "loomsidian"
_KNOWN = {"text", "parentId", "bookmarked"}


def detect(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    state = doc.get("state")
    if isinstance(state, dict) and state and all(map(_is_note, state.values())):
        return True
    return _is_note(doc)


def _is_note(doc: Any) -> bool:
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    return (isinstance(nodes, dict) and "current" in doc
            and all(isinstance(n, dict) and "parentId" in n for n in nodes.values()))  # fmt: skip


def read(doc: dict) -> ForeignTree:
    left_out = []
    title = None
    if "state" in doc and not _is_note(doc):
        notes = object_of(doc["state"], "its state")
        title, note = next(iter(notes.items()))
        other_notes = {path: n for path, n in notes.items() if path != title}
        left_out += [f"{len(other_notes)} other note(s)"] if other_notes else []
        left_out += (
            ["the plugin's settings (not kept: they hold API keys)"] if "settings" in doc else []
        )
        doc = (
            {**object_of(note, f"note {title!r}"), "otherNotes": other_notes}
            if other_notes
            else note
        )
    items = object_of(doc["nodes"], "its nodes")
    nodes = []
    for key, item in items.items():
        item = object_of(item, f"node {key!r}")
        parent = item.get("parentId")
        rest = others(item, _KNOWN)
        nodes.append(ForeignNode(
            key, None if parent is None else node_id(parent, f"node {key!r}: parentId"),
            text_of(item.get("text", ""), f"node {key!r}: text"),
            author="human" if parent is None else "mixed",
            bookmarked=item.get("bookmarked") is True,
            extensions={NAMESPACE: rest} if rest else {},
        ))  # fmt: skip
    rest = others(doc, {"nodes", "current"})
    return ForeignTree(NAME, nodes, current=doc.get("current"), title=title,
                       extensions={NAMESPACE: rest} if rest else {}, left_out=left_out)  # fmt: skip
