"""Short labels for a story's nodes that tell them apart, never starting mid-word.

`apart(text, siblings)`: what sets a node apart from the other branches growing from the
same place: its words after the start it shares with the most alike sibling ("…towering
spires" beside "…quiet gardens" where both begin "city of Nova Haven was a"), or its
opening words where it shares no whole word. `ending(text)`: a node's story's last words,
from a word's start (a bookmark is known by where it ends). Both fit `limit` characters
on one line, ending in "…" when cut.

Pure text functions: the story graph (`weave.view.story_graph`), the node picker
(`weave.view.loom_view`) and the page's bookmarks call them; this module knows no loom.
"""

from __future__ import annotations

from collections.abc import Iterable
from os.path import commonprefix

ELLIPSIS = "…"


def apart(text: str, siblings: Iterable[str], limit: int) -> str:
    """`text`'s words after the longest start it shares, in whole words, with one of
    `siblings` (the other branches from its parent), on one line within `limit`."""
    shared = max((len(commonprefix((text, other))) for other in siblings), default=0)
    start = _word_start(text, shared)
    words = _one_line(text[start:])
    if not text[:start].strip() or not words:  # no whole word shared, or all of it shared
        return _cut(_one_line(text), limit)
    return _cut(ELLIPSIS + words, limit)


def ending(text: str, limit: int) -> str:
    """`text`'s last words on one line within `limit`, from the start of a word."""
    line = _one_line(text)
    if len(line) <= limit:
        return line
    tail = line[-(limit - 1) :]
    space = tail.find(" ")
    if 0 <= space < len(tail) - 1 and not line[-limit].isspace():
        tail = tail[space + 1 :]  # it began mid-word: from the next word
    return ELLIPSIS + tail.lstrip()


def _word_start(text: str, at: int) -> int:
    """The start of the word `at` falls in (`at` itself at a word's start)."""
    if at >= len(text):
        return at
    while at > 0 and not text[at - 1].isspace():
        at -= 1
    return at


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 1].rstrip() + ELLIPSIS
