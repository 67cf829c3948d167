"""Finding many phrases in text at once: a whole text in one pass, or a beam token by token.

A `PhraseSet` is compiled once from literal phrases (`Phrase`: its text, whether case
matters, whether it must stand as whole words) and regular expressions. Two ways in:
  - `find(text, start)`: every occurrence of every literal phrase that starts at or after
    `start`, overlapping ones included, in one pass over the text; `last_found(text,
    start)`: where each phrase found last starts (the lorebook's keys), read in chunks
    from the end back and stopping once every phrase is found.
  - `begin(before)` then `advance(scan, piece)`: a beam read piece by piece (a token's
    text at a time), each step costing O(len(piece)) for the literal phrases, reading
    across the boundary with `before` (the story's end). A step says which phrases the
    piece completed (a ban) and which it extends (a bias: the text now ends inside a
    match, `Step.extended`).

How a literal phrase matches (the lorebook's rules, `weave.story.steering`):
  - Case does not matter unless the phrase is case-sensitive; case is folded one
    character at a time by Python's `str.lower` (a character whose lowercase is longer,
    such as "İ", is kept as it is).
  - Whole words: where the phrase's first (last) character is a letter, digit or
    underscore, the character before (after) the match must not be one. The text's start
    and end count as word edges: scanned piece by piece, a phrase at the end of the text
    so far has matched (its next piece cannot undo that).
How it is done, and why (measured in bench/bench_lorebook.py):
  - One pass: the folded phrases' first `ANCHOR` characters (a shorter phrase is its own
    anchor) are the words of Aho–Corasick automata in C (pyahocorasick), so one scan
    reports every anchor at every position; an anchor that must start a word and does
    not is passed over, the others are checked against the phrases that begin with them
    by a dict lookup per length (`_Anchor`), then against case and word edges. Phrases
    that match alike (the same key in many entries) are looked for once. Two automata,
    each scanned on its own: the short anchors (whole phrases such as names and words,
    common in prose) and the full-length ones (the start of a long phrase, rare in
    prose). `last_found` reads the text in chunks from the end back and, once few of an
    automaton's anchors are left unfound, builds one of those few for the rest (a common
    word found near the end then costs nothing further back). Only anchors go into the
    automata: the whole phrases of the largest lorebook the caps allow (200,000 keys of
    200 characters) make tens of millions of nodes, a minute's build and gigabytes; their
    anchors make a build of seconds.
  - Piece by piece: an Aho–Corasick automaton in Python over the folded phrases (a
    piece's characters walk its goto and fail links), the last few characters kept for
    the case and word-edge checks. Its state is a node number, so every beam carries its
    own and a beam's children each go on from it (pyahocorasick's state cannot be copied).
  - Regular expressions (piece by piece only) run on RE2 (`weave.story.patterns`: linear
    in the text, whatever the pattern), compiled once and asked together; each step
    searches the last `REGEX_WINDOW` characters before the piece plus the piece, and
    counts a match that ends inside the piece (bounded work per step; a match longer than
    the window is not seen). They complete, never extend.
This module knows nothing of lorebooks, bans or searches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import ahocorasick

from weave.story.patterns import Pattern, Patterns, check_total, compile_pattern

ANCHOR = 16  # characters of each phrase in the one-pass automata
CHUNK = 1_024  # `last_found` reads the last this many characters first, then twice as many
NARROW = 512  # `last_found` looks for the anchors left anew where at most this many are
REGEX_WINDOW = 200  # characters before a piece a regular expression may read back


@dataclass(frozen=True)
class Phrase:
    """A literal phrase and how it matches (see the module docstring)."""

    text: str
    case_sensitive: bool = False
    whole_words: bool = True


@dataclass(frozen=True)
class Hit:
    """One occurrence: which phrase (its index in the set) and where, `text[start:end]`."""

    phrase: int
    start: int
    end: int


@dataclass(frozen=True)
class Scan:
    """Where a piece-by-piece reading stands: a node of the automaton and the text's last
    characters (as many as the checks look back)."""

    node: int
    tail: str


@dataclass(frozen=True)
class Step:
    """What one piece did: the phrases it completed, by index (regular expressions after
    the literal phrases), and the literal phrases the text now ends inside of."""

    scan: Scan
    completed: frozenset[int]
    extended: frozenset[int]


def is_word_char(c: str) -> bool:
    """`re`'s `\\w`: a letter, a digit or an underscore (Unicode)."""
    return c.isalnum() or c == "_"


def decode_whole(data: bytes) -> tuple[str, bytes]:
    """`data` as text, and the bytes of a character it ends inside of (a beam's pieces are
    read on: the next may finish it)."""
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError as e:
        if e.reason == "unexpected end of data":
            return data[: e.start].decode("utf-8", "replace"), data[e.start :]
        return data.decode("utf-8", "replace"), b""


def fold(text: str) -> str:
    """`text` with case folded character by character, the same length as `text`."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


class PhraseSet:
    """Literal phrases and regular expressions, compiled once (see the module docstring)."""

    def __init__(self, phrases: Sequence[Phrase], regexes: Sequence[str | Pattern] = ()) -> None:
        """`regexes` as written or compiled (`weave.story.patterns`). Raises ValueError
        naming a phrase that is empty or a regex that cannot run (it does not compile,
        matches empty text, uses what RE2 has not, or the regexes are too large together)."""
        for i, phrase in enumerate(phrases):
            if not phrase.text:
                raise ValueError(f"phrase {i + 1} is empty")
        self.phrases = tuple(phrases)
        self._folded = tuple(fold(p.text) for p in self.phrases)
        compiled = [_compile(r, i) for i, r in enumerate(regexes)]
        check_total(compiled)
        self._regexes = Patterns(compiled)
        # Per phrase: whether it must start a word, and end one (its whole-word edges).
        self._edges = tuple(
            (p.whole_words and is_word_char(p.text[0]), p.whole_words and is_word_char(p.text[-1]))
            for p in self.phrases
        )
        # The short anchors (whole phrases) and the full-length ones (a long phrase's
        # start), each its own automaton: see the module docstring.
        # The one pass looks for one phrase of each set that match alike (the same key in
        # many entries: "the" in a hundred), its twins found with it.
        self._twins: dict[int, list[int]] = {}  # such a phrase -> its twins, where it has
        alike: dict[tuple, int] = {}
        for i, phrase in enumerate(self.phrases):
            form = (self._folded[i], self._edges[i], phrase.case_sensitive and phrase.text)
            first = alike.setdefault(form, i)
            if first != i:
                self._twins.setdefault(first, []).append(i)
        self._by_text: dict[str, list[int]] = {}  # a folded phrase -> those phrases
        for i in alike.values():
            self._by_text.setdefault(self._folded[i], []).append(i)
        del alike
        starting = {f for f, ids in self._by_text.items() if all(self._edges[i][0] for i in ids)}
        anchors = _anchors(self._by_text, starting)
        self._passes = [
            _Pass([a for a in anchors if (len(a.text) < ANCHOR) == short])
            for short in (True, False)
        ]
        self._built: _Automaton | None = None  # the lorebook never reads piece by piece
        longest = max((len(f) for f in self._folded), default=0)
        self._keep = max(longest + 1, REGEX_WINDOW if self._regexes else 0)

    def __len__(self) -> int:
        return len(self.phrases) + len(self._regexes)

    # -- a whole text in one pass ------------------------------------------------------
    def find(self, text: str, start: int = 0) -> list[Hit]:
        """Every occurrence of a literal phrase starting at `start` or after (the text
        before `start` still counts for the word-edge check), in the text's order."""
        folded = fold(text)
        hits = [
            Hit(twin, at, end)
            for scan in self._passes
            for anchor, at in scan.hits(text, folded, start, len(text))
            for i, end in self._matches(anchor, folded, text, at)
            for twin in (i, *self._twins.get(i, ()))
        ]
        return sorted(hits, key=lambda h: (h.start, h.end, h.phrase))

    def last_found(self, text: str, start: int = 0) -> dict[int, int]:
        """{phrase: where its last occurrence starts} for the phrases that occur at
        `start` or after. Read in chunks from the end back, so that a phrase is looked
        for no further back than its last occurrence (a common word is found at once)."""
        folded = fold(text)
        found: dict[int, int] = {}
        for scan in self._passes:
            done: dict[str, int] = {}  # per anchor: how many of its phrases are found
            hi, size, left = len(text), CHUNK, len(scan.anchors)  # left: anchors not done
            while hi > start and left:
                lo = max(start, hi - size)
                latest: dict[int, tuple[int, _Anchor]] = {}
                for anchor, at in scan.hits(text, folded, lo, hi):
                    if done.get(anchor.text, 0) == anchor.phrases:
                        continue
                    for n in anchor.lengths:
                        for i in self._by_text.get(folded[at : at + n], ()):
                            if i not in found and self._holds(i, text, at, at + n):
                                latest[i] = at, anchor  # hits come in the text's order
                for i, (at, anchor) in latest.items():
                    found[i] = at
                    done[anchor.text] = done.get(anchor.text, 0) + 1
                    left -= done[anchor.text] == anchor.phrases
                hi, size = lo, size * 2
                scan = scan.narrowed(done, left)
        for i, twins in self._twins.items():
            if i in found:
                found.update(dict.fromkeys(twins, found[i]))
        return found

    def _matches(
        self, anchor: _Anchor, folded: str, text: str, at: int
    ) -> Iterator[tuple[int, int]]:
        """(phrase, end) of each phrase beginning with `anchor`, found at `at`, that
        `folded` holds there and that matches there with its case and word edges."""
        for n in anchor.lengths:
            for i in self._by_text.get(folded[at : at + n], ()):
                if self._holds(i, text, at, at + n):
                    yield i, at + n

    # -- a beam, piece by piece --------------------------------------------------------
    def begin(self, before: str = "") -> Scan:
        """The scan of a text that so far reads `before` (nothing found in it counts)."""
        # The automaton's node depends on the last `longest` characters only.
        return self.advance(Scan(0, ""), before[-self._keep :] if self._keep else "").scan

    def advance(self, scan: Scan, piece: str) -> Step:
        """Read `piece` after the text `scan` stands at: O(len(piece)) for the literal
        phrases, O(REGEX_WINDOW + len(piece)) for each regular expression."""
        text = scan.tail + piece
        cut = len(scan.tail)
        node, ends = self._automaton.walk(scan.node, fold(piece), cut)
        completed = {i for i, end in ends if self._holds(i, text, end - len(self._folded[i]), end)}
        if self._regexes:
            found = self._regexes.ending_after(text, max(0, cut - REGEX_WINDOW), cut)
            completed.update(len(self.phrases) + j for j in found)
        extended = {
            i
            for depth, ids in self._automaton.partial(node)
            for i in ids
            if i not in completed and self._holds(i, text, len(text) - depth, None)
        }
        scan = Scan(node, text[-self._keep :] if self._keep else "")
        return Step(scan, frozenset(completed), frozenset(extended))

    @property
    def _automaton(self) -> _Automaton:
        if self._built is None:
            self._built = _Automaton(self._folded)
        return self._built

    def _holds(self, i: int, text: str, start: int, end: int | None) -> bool:
        """Whether phrase `i`, folded-matched at `text[start:end]` (`end` None: a partial
        match running to the text's end), also matches its word edges and case."""
        starts_word, ends_word = self._edges[i]
        if starts_word and start > 0 and is_word_char(text[start - 1]):
            return False
        if ends_word and end is not None and end < len(text) and is_word_char(text[end]):
            return False
        phrase = self.phrases[i]
        if not phrase.case_sensitive:
            return True
        stop = len(text) if end is None else end
        return text[start:stop] == phrase.text[: stop - start]


def _compile(pattern: str | Pattern, i: int) -> Pattern:
    if isinstance(pattern, Pattern):
        return pattern
    try:
        return compile_pattern(pattern)
    except ValueError as e:
        raise ValueError(f"regex {i + 1} ({pattern!r}) {e}") from e


class _Anchor(NamedTuple):
    """The first ANCHOR folded characters of some phrases (a shorter phrase is its own
    anchor): the lengths of the distinct folded phrases it begins, how many of the
    phrases the one pass looks for (one of each set of twins) it begins, and whether they
    all must start a word (a hit inside a word is then passed over at once: "he" inside
    "the", the most common hit in prose)."""

    text: str
    lengths: tuple[int, ...]
    phrases: int
    starts_word: bool


def _anchors(by_text: dict[str, list[int]], starting: set[str]) -> list[_Anchor]:
    """The anchors of the folded phrases `by_text` (the phrases each one is), `starting`
    the folded phrases whose phrases all must start a word."""
    lengths: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    edge: dict[str, bool] = {}
    for folded, ids in by_text.items():
        anchor = folded[:ANCHOR]
        lengths.setdefault(anchor, set()).add(len(folded))
        counts[anchor] = counts.get(anchor, 0) + len(ids)
        edge[anchor] = edge.get(anchor, True) and folded in starting
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}  # one tuple per set of lengths
    anchors = []
    for anchor, ns in lengths.items():
        key = tuple(sorted(ns))
        anchors.append(_Anchor(anchor, shared.setdefault(key, key), counts[anchor], edge[anchor]))
    return anchors


class _Pass:
    """One automaton of the one pass: `anchors`, each its own word and value."""

    def __init__(self, anchors: Sequence[_Anchor]) -> None:
        self.anchors = tuple(anchors)
        self._automaton = ahocorasick.Automaton()
        for anchor in self.anchors:
            self._automaton.add_word(anchor.text, anchor)
        self._automaton.make_automaton()

    def hits(self, text: str, folded: str, lo: int, hi: int) -> Iterator[tuple[_Anchor, int]]:
        """(anchor, where it starts) for each anchor that starts in [lo, hi) of `text`
        (`folded` its folded form), in the order they end, but where it must start a word
        and does not."""
        if not self.anchors:
            return
        for last, anchor in self._automaton.iter(folded, lo, min(len(folded), hi + ANCHOR - 1)):
            at = last + 1 - len(anchor.text)
            if at < hi and not (anchor.starts_word and at and is_word_char(text[at - 1])):
                yield anchor, at

    def narrowed(self, done: dict[str, int], left: int) -> _Pass:
        """This pass looking only for the `left` anchors not `done` (how many of each one's
        phrases are found), where they are few (common keys found, a rare one left: the
        rest of the story is then scanned with next to no hits); else this pass as it is."""
        if left > NARROW or left * 4 > len(self.anchors):
            return self
        return _Pass([a for a in self.anchors if done.get(a.text, 0) < a.phrases])


class _Automaton:
    """Aho–Corasick over folded phrases: node 0 is the root; `goto` the trie's edges,
    `fail` the longest proper suffix that is also a trie node, `ends` the phrases that
    end at a node or at a node on its fail chain, `starts` the phrases a node begins."""

    def __init__(self, folded: Sequence[str]) -> None:
        self.goto: list[dict[str, int]] = [{}]
        self.depth = [0]
        ends: list[list[int]] = [[]]
        starts: list[list[int]] = [[]]
        for i, text in enumerate(folded):
            node = 0
            for c in text:
                if c not in self.goto[node]:
                    self.goto[node][c] = len(self.goto)
                    self.goto.append({})
                    self.depth.append(self.depth[node] + 1)
                    ends.append([])
                    starts.append([])
                node = self.goto[node][c]
                starts[node].append(i)
            ends[node].append(i)
        self.fail = [0] * len(self.goto)
        order = list(self.goto[0].values())
        for node in order:  # breadth first: a node's fail is set before its children's
            for c, child in self.goto[node].items():
                order.append(child)
                f = self.fail[node]
                while f and c not in self.goto[f]:
                    f = self.fail[f]
                self.fail[child] = self.goto[f].get(c, 0)
                ends[child].extend(ends[self.fail[child]])
        self.ends = [tuple(e) for e in ends]
        self.starts = [tuple(s) for s in starts]

    def walk(self, node: int, folded: str, offset: int) -> tuple[int, list[tuple[int, int]]]:
        """Read `folded` from `node`: the node reached and each (phrase, end) that ended,
        `end` counted from `offset` (where `folded` starts in the caller's text)."""
        goto, fail, ends = self.goto, self.fail, self.ends
        found = []
        for k, c in enumerate(folded, offset + 1):
            while node and c not in goto[node]:
                node = fail[node]
            node = goto[node].get(c, 0)
            found.extend((i, k) for i in ends[node])
        return node, found

    def partial(self, node: int) -> list[tuple[int, tuple[int, ...]]]:
        """(depth, phrases begun) for `node` and each node on its fail chain: the text
        ends with the first `depth` characters of those phrases."""
        out = []
        while node:
            out.append((self.depth[node], self.starts[node]))
            node = self.fail[node]
        return out
