"""Finding a branch again: which nodes of a writer's stories hold some text.

A node is found where the text, ignoring case, ends in it: the match may begin in the
nodes before it on its path (an accepted suggestion is a few words, so a phrase a writer
remembers usually spans several nodes). Each node is matched against a short window of
its path, the end of its parent's window followed by its own text, so the whole scan is
linear in the stories' text, never in their depth; a match is reported once, at the node
where it ends, with the text around it.

Measured against SQLite's FTS5 (available in this Python's sqlite3): FTS5 indexes each
node's own text, so a phrase across two nodes is not found, and its index would be a
second copy of every node to keep in step; this scan reads the rows it needs in one query
and answers a 10,000-node loom in well under the 50 ms asked (`bench/bench_find.py`).

This module is pure: the rows come from the store (`weave.loom.store_rows.node_texts`, which
keeps to the writer's own stories) and it knows nothing of the page or the command line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CONTEXT = 40  # characters of the story shown before and after a match
MAX_FOUND = 50  # the most matches returned: a search box shows a few, a script may page


@dataclass(frozen=True)
class StoryNodes:
    """A story's nodes as the search reads them, in columns (one object a story, not one
    a node: 10,000 of those cost more than the search), each parent before its children."""

    story_id: str
    title: str
    ids: list[str]
    parents: list[str | None]
    texts: list[str]


@dataclass(frozen=True)
class Found:
    """A node where the text ends: its story, and the story's text around the match."""

    story_id: str
    title: str
    node_id: str
    before: str  # up to CONTEXT characters of the story before the match
    match: str  # the story's text that matched, as written
    after: str  # up to CONTEXT characters after it, within the node

    @property
    def snippet(self) -> str:
        return f"…{self.before}{self.match}{self.after}…"

    def to_dict(self) -> dict:
        return {"story": self.story_id, "title": self.title, "node": self.node_id,
                "before": self.before, "match": self.match, "after": self.after}  # fmt: skip


def find(stories: Iterable[StoryNodes], text: str, *, limit: int = MAX_FOUND) -> list[Found]:
    """The nodes where `text` (case ignored) ends, story by story in the order given, at
    most `limit`. An empty or all-blank `text` finds nothing."""
    wanted = text.casefold()
    if not wanted.strip():
        return []
    keep = len(wanted) - 1 + CONTEXT  # a window's tail: a match's start, and its context
    found: list[Found] = []
    for story in stories:
        windows: dict[str | None, str] = {None: ""}
        for node_id, parent, own in zip(story.ids, story.parents, story.texts, strict=True):
            tail = windows.get(parent, "")
            window = tail + own
            windows[node_id] = window[-keep:]
            if wanted in window.casefold():
                hit = _match(window, wanted, len(tail))
                if hit is not None:
                    found.append(Found(story.story_id, story.title, node_id, *hit))
                    if len(found) == limit:
                        return found
    return found


def _match(window: str, wanted: str, tail: int) -> tuple[str, str, str] | None:
    """(before, match, after) of the last match of `wanted` in `window` that ends past its
    first `tail` characters (those are the parent's: a match there is the parent's)."""
    folded = window.casefold()
    if len(folded) != len(window):  # a character folds to several ("ß"): no shared positions
        return ("", window[tail:], "") if wanted in folded else None
    at = folded.rfind(wanted)
    if at < 0 or at + len(wanted) <= tail:
        return None
    end = at + len(wanted)
    return window[max(0, at - CONTEXT) : at], window[at:end], window[end : end + CONTEXT]
