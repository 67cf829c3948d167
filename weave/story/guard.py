"""The compiled guard: a `weave.story.bans.Bans` read for one story, which the search asks
about each candidate token (`Guard.step`, an automaton stepped per beam across the
boundary with the story's end), pruning those that complete a banned phrase or regex
(`weave.story.phrases` steps them) or, for the repetition guard, a run of words found in
the story's last `REPEAT_CHARS` characters (case folded). `GuardState` is where a beam
stands, `Verdict` what one token does, `Pruned` a branch cut and why; `banned_among` marks
the model's alternatives at a token of the story. The rules and their files are
`weave.story.bans`'. This module knows nothing of backends, pages or stores.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from weave.story.bans import Bans
from weave.story.phrases import Scan, decode_whole, fold

if TYPE_CHECKING:  # a type only: the guard runs without loading a backend
    from backends.base import Candidate

REPEAT_CHARS = 2_000
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class GuardState:
    """Where a beam stands for the guard: its scan and, for the repetition guard, its
    last words (the current one unfinished); `pending` holds a UTF-8 character's bytes
    split between tokens."""

    bans: Scan
    words: tuple[str, ...] = ()
    word: str = ""
    pending: bytes = b""


@dataclass(frozen=True)
class Verdict:
    """What one token does: the state after it, and why it is pruned (None: it is not)."""

    state: GuardState
    pruned_by: str | None


@dataclass(frozen=True)
class Pruned:
    """A branch the guard pruned: the beam's text with the token, and why."""

    text: str
    by: str  # the banned phrase, or "repeats “…”"


@dataclass
class Guard:
    """A `Bans` read for a story: which tokens it prunes."""

    bans: Bans
    story_text: str
    _runs: frozenset[tuple[str, ...]] = field(init=False)

    def __post_init__(self) -> None:
        compiled = self.bans.compiled()
        self._banned, self._ban_names = compiled.banned, compiled.ban_names
        self._runs = _runs(self.story_text, self.bans.no_repeat_words)

    def screen(self, state: GuardState, options: Sequence[Candidate]):
        """`options` (a beam's candidates, best first): those kept, each with its state,
        and those pruned, each with why."""
        kept, pruned = [], []
        for cand in options:
            verdict = self.step(state, cand.piece)
            if verdict.pruned_by is not None:
                pruned.append((cand, verdict.pruned_by))
            else:
                kept.append((cand, verdict.state))
        return kept, pruned

    def before(self, typed: str) -> Guard:
        """This guard read where the story ends less `typed`: a healed search's first
        tokens spell the typed text again (`weave.search.healing`)."""
        if not typed or not self.story_text.endswith(typed):
            return self
        return Guard(self.bans, self.story_text[: -len(typed)])

    def root(self) -> GuardState:
        """The state at the story's end."""
        n = self.bans.no_repeat_words
        words = tuple(_WORDS.findall(fold(self.story_text[-REPEAT_CHARS:])))
        ends_in_word = bool(self.story_text) and _WORDS.match(self.story_text[-1]) is not None
        word = words[-1] if ends_in_word and words else ""
        done = words[:-1] if word else words
        return GuardState(
            self._banned.begin(self.story_text),
            done[len(done) - n + 1 :] if n > 1 else (),
            word,
        )

    def step(self, state: GuardState, piece: bytes) -> Verdict:
        """Read one token's bytes after `state`: O(len(piece)) for literal phrases."""
        text, pending = decode_whole(state.pending + piece)
        bans = self._banned.advance(state.bans, text)
        words, word, repeated = self._read_words(state.words, state.word, text)
        pruned_by = None
        if bans.completed:
            pruned_by = self._ban_names[min(bans.completed)]
        elif repeated:
            pruned_by = f"repeats “{repeated}”"
        return Verdict(GuardState(bans.scan, words, word, pending), pruned_by)

    def _read_words(self, words, word, text) -> tuple[tuple[str, ...], str, str | None]:
        """The words after `text`; the run of N words it completed that the story holds."""
        n = self.bans.no_repeat_words
        if not n:
            return words, word, None
        repeated = None
        for c in fold(text):
            if c.isalnum() or c == "_":
                word += c
                continue
            if word:
                run = (*words, word)
                if len(run) == n and run in self._runs and repeated is None:
                    repeated = " ".join(run)
                words, word = run[len(run) - n + 1 :] if n > 1 else (), ""
        return words, word, repeated


def banned_among(bans: Bans, before: str, options: Sequence[Candidate]) -> dict[int, str]:
    """Which of `options` (the model's alternatives at a token of the story, after the
    text `before`) the bans prune, by index, and why: the page marks them."""
    if not bans.active:
        return {}
    guard = Guard(bans, before)
    root = guard.root()
    verdicts = ((i, guard.step(root, c.piece).pruned_by) for i, c in enumerate(options))
    return {i: why for i, why in verdicts if why is not None}


def _runs(story_text: str, n: int) -> frozenset[tuple[str, ...]]:
    """Every run of `n` words in the story's last REPEAT_CHARS characters (case folded)."""
    if not n:
        return frozenset()
    tail = story_text[-REPEAT_CHARS:]
    words = _WORDS.findall(fold(tail))
    if len(story_text) > REPEAT_CHARS and _WORDS.match(tail[0]):
        words = words[1:]  # the tail began inside a word
    if words and _WORDS.match(tail[-1]):
        words = words[:-1]  # the story ends inside a word: a beam may finish it otherwise
    return frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
