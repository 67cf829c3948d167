"""Which lorebook entries fire on a story: every entry's keys found in one pass.

`LoreKeys(entries)` compiles the keys of all the entries into one `weave.story.phrases.PhraseSet`
(primary and secondary keys alike, each with its entry's case and whole-word options),
and `fired(story_text)` reads the story's end once, as far back as the entry that looks
furthest (`scan_chars`), then applies each entry's own scan start and secondary-key logic
to the hits. The rules are `LoreEntry.fires`'s (`weave.steering`'s docstring); this module
only makes them cost one pass for the whole lorebook instead of a scan per key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from weave.story.phrases import Phrase, PhraseSet

if TYPE_CHECKING:
    from weave.story.steering import LoreEntry


class LoreKeys:
    """The keys of a lorebook's entries, compiled once."""

    def __init__(self, entries: Sequence[LoreEntry]) -> None:
        self.entries = tuple(entries)
        phrases: list[Phrase] = []
        # Per entry: the phrase indices of its primary keys and of its secondary keys.
        self._owners: list[tuple[range, range]] = []
        for entry in self.entries:
            spans = []
            for keys in (entry.keys, entry.secondary_keys):
                first = len(phrases)
                phrases += [
                    Phrase(k.strip(), entry.case_sensitive, entry.whole_words)
                    for k in keys
                    if k.strip()  # a blank key is no key
                ]
                spans.append(range(first, len(phrases)))
            self._owners.append((spans[0], spans[1]))
        self._phrases = PhraseSet(phrases)
        self._reach = max((e.scan_chars for e in self.entries), default=0)

    def fired(self, story_text: str) -> tuple[LoreEntry, ...]:
        """The entries that go into the context of a story ending in `story_text`, in the
        lorebook's order."""
        found = self._phrases.last_found(story_text, max(0, len(story_text) - self._reach))
        return tuple(
            entry
            for entry, owners in zip(self.entries, self._owners, strict=True)
            if _fires(entry, owners, found, max(0, len(story_text) - entry.scan_chars))
        )


def _fires(
    entry: LoreEntry, owners: tuple[range, range], found: dict[int, int], start: int
) -> bool:
    if not entry.enabled or not entry.text:
        return False
    if entry.constant:
        return True
    primary, secondary = owners
    if not any(found.get(i, -1) >= start for i in primary):
        return False
    seen = [found.get(i, -1) >= start for i in secondary]
    if not seen:
        return True
    return {
        "and_any": any(seen),
        "and_all": all(seen),
        "not_any": not any(seen),
        "not_all": not all(seen),
    }[entry.logic]
