"""mikupad (lmg-anon/mikupad): a session file, read only.

A session is flat: `{name, prompt: [{type, content}...], memoryTokens: {prefix, text,
suffix}, authorNoteTokens: {...}, authorNoteDepth, worldInfo: {entries: [{displayName,
text, keys, search}]}, seed, temperature, ...}`, each value JSON-encoded as a string in an
exported file (mikupad's "compatibility with localStorage"), or plain; a string's JSON is
read within the same bounds as a file (`bounded_json`). The prompt's text
becomes one node (the writer's when every chunk is the user's, else "mixed"); the memory,
the author's note and its depth, and the world info entries become the story's steering.
The sampler settings and the rest are kept in `extensions["mikupad"]`, except the
endpoint's API key, which is not kept.
"""

from __future__ import annotations

from typing import Any

from weave.finite import non_finite
from weave.interop.foreign import ForeignNode, ForeignTree, list_of, object_of, others, text_of
from weave.loom.formats import bounded_json
from weave.story.steering import MAX_NOTE_DEPTH, LoreEntry, Steering

NAME = "mikupad"
NAMESPACE = "mikupad"
SECRETS = {"endpointAPIKey"}
_KNOWN = {"name", "prompt", "memoryTokens", "authorNoteTokens", "authorNoteDepth", "worldInfo"}


def detect(doc: Any) -> bool:
    marks = ("memoryTokens", "authorNoteTokens", "worldInfo", "endpoint")
    return isinstance(doc, dict) and "prompt" in doc and any(k in doc for k in marks)


def read(doc: dict) -> ForeignTree:
    session = {k: _decoded(k, v) for k, v in doc.items()}
    chunks = list_of(session["prompt"], "its prompt")
    if isinstance(session["prompt"], str):
        chunks = [{"type": "user", "content": session["prompt"]}]
    texts = [text_of(object_of(c, "a prompt chunk").get("content", ""), "a chunk's content")
             for c in chunks]  # fmt: skip
    human = all(isinstance(c, dict) and c.get("type") == "user" for c in chunks)
    rest = {k: v for k, v in others(session, _KNOWN).items() if k not in SECRETS}
    memory = object_of(session.get("memoryTokens", {}), "its memoryTokens")
    note = object_of(session.get("authorNoteTokens", {}), "its authorNoteTokens")
    world = object_of(session.get("worldInfo", {}), "its worldInfo")
    rest |= {"chunks": chunks} if len(chunks) > 1 or not human else {}
    rest |= {k: v for k, v in (("memoryTokens", memory), ("authorNoteTokens", note),
                                ("worldInfo", world)) if v}  # fmt: skip
    name = session.get("name")
    left_out = ["the endpoint's API key (not kept)"] if SECRETS & doc.keys() else []
    left_out += ["the sampler settings"] if rest else []
    return ForeignTree(
        NAME, [ForeignNode("mikupad-text", None, "".join(texts),
                           author="human" if human else "mixed")],
        title=name if isinstance(name, str) and name.strip() else None,
        steering=_steering(memory, note, session.get("authorNoteDepth"), world),
        extensions={NAMESPACE: rest} if rest else {}, left_out=left_out,
    )  # fmt: skip


def _decoded(key: str, value: Any) -> Any:
    """An exported session's value: JSON in a string, read with the bounds of the file
    itself (a plain string stays as it is)."""
    if not isinstance(value, str):
        return value
    try:
        decoded = bounded_json(value)
    except ValueError as e:
        if str(e).startswith("it is not JSON"):
            return value
        raise ValueError(f"its {key!r}, JSON in a string: {e}") from None
    if (where := non_finite(decoded)) is not None:
        raise ValueError(f"its {key!r} holds a number too large for a float (at {where})")
    return decoded


def _steering(memory: dict, note: dict, depth: Any, world: dict) -> Steering:
    entries = []
    for entry in list_of(world.get("entries", []), "its world info entries"):
        entry = object_of(entry, "a world info entry")
        keys = tuple(k for k in entry.get("keys") or () if isinstance(k, str) and k.strip())
        name = entry.get("displayName")
        entries.append(LoreEntry(keys, text_of(entry.get("text", ""), "a world info text"),
                                 name=name if isinstance(name, str) else ""))  # fmt: skip
    depth = depth if type(depth) is int else 3
    return Steering(
        memory=text_of(memory.get("text", ""), "the memory"),
        note=text_of(note.get("text", ""), "the author's note"),
        note_depth=min(max(depth, 1), MAX_NOTE_DEPTH), lore=tuple(entries),
    )  # fmt: skip
