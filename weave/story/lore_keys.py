"""Which lorebook entries fire on a story: every entry's keys found in one pass.

`LoreKeys(entries)` compiles the keys of all the entries into one `weave.story.phrases.PhraseSet`
(primary and secondary keys alike, each with its entry's case and whole-word options),
and `fired(story_text)` reads the story's end once, as far back as the entry that looks
furthest (`scan_chars`), then applies each entry's own scan start and secondary-key logic
to the hits. The rules are `LoreEntry.fires`'s (`weave.story.steering`'s docstring); this module
only makes them cost one pass for the whole lorebook instead of a scan per key.

`lore_keys(entries)` is the compiled keys of a lorebook, cached by its content (the last
`KEPT` lorebooks): a story's steering is a new value whenever it is read from the store or
its memory or note is edited, and the largest lorebook the caps allow takes a second or
two to compile (bench/bench_lorebook.py), so that is paid once per lorebook, not per value.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from weave.story.phrases import Phrase, PhraseSet

if TYPE_CHECKING:
    from weave.story.steering import LoreEntry

KEPT = 4  # compiled lorebooks kept (a tab or two's stories; the largest the caps allow ~200 MB)


@lru_cache(maxsize=KEPT)
def lore_keys(entries: tuple[LoreEntry, ...]) -> LoreKeys:
    """The keys of `entries` compiled, or found compiled for a lorebook equal to it."""
    return LoreKeys(entries)


class LoreKeys:
    """The keys of a lorebook's entries, compiled once."""

    def __init__(self, entries: Sequence[LoreEntry]) -> None:
        self.entries = tuple(entries)
        phrases: list[Phrase] = []
        self._owner: list[tuple[int, bool]] = []  # per phrase: its entry, and if secondary
        self._secondaries: list[int] = []  # per entry: how many secondary keys it has
        for e, entry in enumerate(self.entries):
            primary, secondary = (
                [k.strip() for k in keys if k.strip()]  # a blank key is no key
                for keys in (entry.keys, entry.secondary_keys)
            )
            for keys, is_secondary in ((primary, False), (secondary, True)):
                phrases += [Phrase(k, entry.case_sensitive, entry.whole_words) for k in keys]
                self._owner += [(e, is_secondary)] * len(keys)
            self._secondaries.append(len(secondary))
        self._phrases = PhraseSet(phrases)
        self._reach = max((e.scan_chars for e in self.entries), default=0)

    def fired(self, story_text: str) -> tuple[LoreEntry, ...]:
        """The entries that go into the context of a story ending in `story_text`, in the
        lorebook's order. Costs the one pass and a step per key found, not per key."""
        end = len(story_text)
        found = self._phrases.last_found(story_text, max(0, end - self._reach))
        keyed: set[int] = set()  # the entries one of whose keys is in their scan
        seen = [0] * len(self.entries)  # per entry: its secondary keys in its scan
        for i, at in found.items():
            e, secondary = self._owner[i]
            if at >= end - self.entries[e].scan_chars:
                if secondary:
                    seen[e] += 1
                else:
                    keyed.add(e)
        return tuple(
            entry
            for e, entry in enumerate(self.entries)
            if _fires(entry, e in keyed, seen[e], self._secondaries[e])
        )


def _fires(entry: LoreEntry, keyed: bool, seen: int, secondaries: int) -> bool:
    """Whether `entry` fires, one of its keys found (`keyed`) and `seen` of its
    `secondaries` secondary keys."""
    if not entry.enabled or not entry.text:
        return False
    if entry.constant:
        return True
    if not keyed:
        return False
    if not secondaries:
        return True
    return {
        "and_any": seen > 0,
        "and_all": seen == secondaries,
        "not_any": seen == 0,
        "not_all": seen < secondaries,
    }[entry.logic]
