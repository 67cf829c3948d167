"""The context the model sees: a story plus its steering, as token ids and marked parts.

`build_context` is the one place that turns a story and its `Steering` into the ids every
backend receives. In order:
  1. the memory, as its own line(s);
  2. each lorebook entry that fires on the story (`LoreEntry.fires`), in the lorebook's
     order, each as its own line(s);
  3. the story, with the author's note inserted as its own line before the story's last
     `note_depth` lines. Blank lines do not count as lines, and the note goes after a run
     of newlines, never inside one: in "a\\n\\nb\\n\\nc" depth 1 puts it before "c", depth 2
     before "b". A story with fewer lines has the note before its start.
The context ends exactly where the story ends, so suggestions continue the story. The
note is inserted as the writer wrote it (write "[Style: dark]" to get brackets).

Built for a KV cache that reuses the longest common prefix (the MLX backend's):
  - Each part is tokenized on its own and the story's own ids are used as they are, so
    with no note the ids are exactly `prefix_ids + story_ids`: accepting a suggestion
    appends the beam's ids and costs no prefill. The prefix (memory, then the fired
    entries) stays the same until another entry fires or one stops firing.
  - With a note, the ids before it (prefix and the story up to the note's line) stay the
    same while the accepted text adds no line: an accept changes only the ids from the
    note to the end. The story's own ids are split at the note's line (`_split`); where
    no token boundary falls there (a token spanning the line start), both halves are
    tokenized afresh, and an accept that adds no line may then cost a few ids of prefill
    (those after the note that tokenize differently once the beam's text follows).
  - Where the whole would pass `max_tokens`, the story's start is cut (never the memory,
    the lore or the note), by a multiple of a step (a quarter of the story's room, at most
    `BLOCK` tokens), so successive searches keep sharing a prefix while the story grows;
    `Context.left_out` says how many story tokens were cut. This is the one window cut:
    the search and the sampler only check that what they are sent fits
    (`weave.search.beams.check_fits`).

Steering text is tokenized by the same `tokenize` as story text: the backends read a
control token's name ("<|im_end|>") in text as characters, so memory, lore and note text
stays text. This module is pure: of a backend it calls only the `tokenize`/`detokenize`
it is given, and it knows nothing of the loom, the store or the page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from weave.story.steering import LoreEntry, Steering

Tokenize = Callable[[str], list[int]]
Detokenize = Callable[[list[int]], str]
KINDS = ("memory", "lore", "story", "note")
BLOCK = 512  # the most story tokens a cut steps by: cuts fall on few places (cache-friendly)
_TITLES = {"memory": "memory", "lore": "lore", "story": "story", "note": "author's note"}


@dataclass(frozen=True)
class ContextPart:
    """One marked stretch of the context: what it is, its text and its ids."""

    kind: str  # one of KINDS
    text: str  # as the model reads it (a cut story's text is its kept ids, detokenized)
    ids: tuple[int, ...]
    label: str = ""  # a lore entry's label

    @property
    def token_count(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Context:
    """What the model sees for one search, and how it was made."""

    ids: tuple[int, ...]  # every part's ids, in order: what the backend receives
    parts: tuple[ContextPart, ...]
    fired: tuple[LoreEntry, ...]  # the lorebook entries inserted, in order
    left_out: int  # story tokens cut from the start to fit max_tokens
    prefix_len: int  # ids before the story: memory and fired entries

    @property
    def token_count(self) -> int:
        return len(self.ids)

    @property
    def prefix_ids(self) -> tuple[int, ...]:
        return self.ids[: self.prefix_len]

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.parts)

    def marked_text(self) -> str:
        """The context as text, each part under a header naming it and its tokens."""
        lines = []
        for part in self.parts:
            title = _TITLES[part.kind] + (f": {part.label}" if part.label else "")
            cut = f", {self.left_out:,} left out before" if part is self._first_story() else ""
            lines.append(f"[{title} · {part.token_count:,} tokens{cut}]\n{part.text}")
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    def _first_story(self) -> ContextPart | None:
        if not self.left_out:
            return None
        return next((p for p in self.parts if p.kind == "story"), None)


def build_context(
    steering: Steering,
    story_text: str | None = None,
    *,
    tokenize: Tokenize,
    detokenize: Detokenize,
    story_ids: Sequence[int] | None = None,
    max_tokens: int | None = None,
) -> Context:
    """The context for a story under its steering (see the module docstring).

    Args:
        steering: the story's memory, note and lorebook.
        story_text: the story; None to take it from `story_ids` (detokenized).
        tokenize, detokenize: the backend's (`Backend.tokenize`, `Backend.detokenize`).
        story_ids: the story's exact ids where known (an accepted beam's ids, whose KV the
            backend holds); None to tokenize `story_text`.
        max_tokens: the most ids the context may hold (the model's context length less
            the room the search needs); None for no limit.
    Returns:
        The `Context`: ids, marked parts, fired entries, story tokens left out.
    Raises:
        ValueError: neither text nor ids given, or memory, lore and note alone leave no
            room for the story within `max_tokens`.
    """
    if story_text is None:
        if story_ids is None:
            raise ValueError("build_context needs the story's text or its ids")
        story_text = detokenize(list(story_ids))
    ids = list(story_ids) if story_ids is not None else tokenize(story_text)
    memory = _part("memory", steering.memory, tokenize)
    fired = steering.fired(story_text)
    lore = [_part("lore", entry.text, tokenize, entry.label) for entry in fired]
    prefix = [p for p in (memory, *lore) if p is not None]
    note = _part("note", steering.note, tokenize)
    at = note_position(story_text, steering.note_depth) if note else len(story_text)
    head, tail = _split(story_text, ids, at, tokenize, detokenize)
    fixed = sum(p.token_count for p in (*prefix, note) if p is not None)
    cut = _cut(len(head) + len(tail), fixed, max_tokens)  # a fresh split may differ from ids
    story = [
        _story(story_text[:at], head, cut, detokenize),
        note,
        _story(story_text[at:], tail, max(0, cut - len(head)), detokenize),
    ]
    parts = (*prefix, *(p for p in story if p is not None and (p.ids or p.kind == "note")))
    return Context(
        ids=tuple(i for part in parts for i in part.ids),
        parts=parts,
        fired=fired,
        left_out=cut,
        prefix_len=sum(p.token_count for p in prefix),
    )


def note_position(text: str, depth: int) -> int:
    """Where in `text` the note's line goes: the start of its `depth`-th last line,
    blank lines not counted; 0 when the text has fewer lines."""
    starts = [0, *(m.end() for m in re.finditer(r"\n+", text) if m.end() < len(text))]
    return starts[-depth] if depth <= len(starts) else 0


def _part(kind: str, text: str, tokenize: Tokenize, label: str = "") -> ContextPart | None:
    """A steering text as its own line(s); None when there is none."""
    if not text:
        return None
    line = text if text.endswith("\n") else text + "\n"
    return ContextPart(kind, line, tuple(tokenize(line)), label)


def _split(
    text: str, ids: list[int], at: int, tokenize: Tokenize, detokenize: Detokenize
) -> tuple[list[int], list[int]]:
    """The story's ids before and after character `at`, keeping its own ids wherever one
    of their token boundaries falls there, else tokenizing both sides afresh.

    The story's ids split where `text[:at]` tokenized alone ends, or a token or two
    away (a GPT-2 style tokenizer reads "\n\n" alone as one token, but "\n\nMira" as
    "\n", "\n", "Mira"); a token spanning `at` ("\n " before "  y") leaves no split.
    """
    if at in (0, len(text)):
        return ([], ids) if at == 0 else (ids, [])
    head = tokenize(text[:at])
    if ids[: len(head)] == head:
        return head, ids[len(head) :]
    for k in (len(head) + 1, len(head) - 1, len(head) + 2, len(head) - 2):
        if 0 < k < len(ids) and detokenize(ids[:k]) == text[:at]:
            return ids[:k], ids[k:]
    return head, tokenize(text[at:])


def _cut(story_len: int, fixed: int, max_tokens: int | None) -> int:
    """How many story tokens to leave out at the start so the whole fits `max_tokens`."""
    if max_tokens is None:
        return 0
    room = max_tokens - fixed
    if room < min(1, story_len):
        raise ValueError(
            f"memory, lorebook entries and author's note take {fixed:,} tokens, leaving no "
            f"room for the story in the model's {max_tokens:,}: shorten them"
        )
    over = story_len - room
    if over <= 0:
        return 0
    step = max(1, min(BLOCK, room // 4))  # cut <= over + step - 1 < story_len
    return min(story_len, math.ceil(over / step) * step)


def _story(text: str, ids: list[int], cut: int, detokenize: Detokenize) -> ContextPart:
    """A stretch of the story, less its first `cut` ids (text as the model reads it)."""
    if cut == 0:
        return ContextPart("story", text, tuple(ids))
    kept = ids[cut:]
    return ContextPart("story", detokenize(kept) if kept else "", tuple(kept))
