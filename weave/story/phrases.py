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

How a literal phrase matches (the lorebook's rules, `weave.steering`):
  - Case does not matter unless the phrase is case-sensitive; case is folded one
    character at a time by Python's `str.lower` (a character whose lowercase is longer,
    such as "İ", is kept as it is).
  - Whole words: where the phrase's first (last) character is a letter, digit or
    underscore, the character before (after) the match must not be one. The text's start
    and end count as word edges: scanned piece by piece, a phrase at the end of the text
    so far has matched (its next piece cannot undo that).
How it is done, and why (measured in bench/bench_lorebook.py):
  - One pass: the folded phrases' first `ANCHOR` characters are one regular expression
    shaped as a trie (`(?=(ab(?:c|d)…))`), so `re` tries every phrase at every position
    in C in a single scan (two: phrases that must start a word are looked for only where
    a word starts, behind `(?<!\\w)`); each anchor found is checked against the phrases
    that begin with it by a dict lookup per length (`_AnchorIndex`). An alternation of
    whole phrases takes `re` tens of seconds to compile for the largest lorebook the
    caps allow (200,000 keys of 200 characters); a pure Python Aho–Corasick pass over
    100,000 characters costs seconds under load (bench/bench_lorebook.py prints both).
  - Piece by piece: an Aho–Corasick automaton over the folded phrases (a piece's
    characters walk its goto and fail links), the last few characters kept for the case
    and word-edge checks.
  - Regular expressions (piece by piece only) are compiled once; each step searches the
    last `REGEX_WINDOW` characters before the piece plus the piece, and counts a match
    that ends inside the piece (bounded work per step; a match longer than the window is
    not seen). They complete, never extend.
This module knows nothing of lorebooks, bans or searches.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

ANCHOR = 8  # characters of each phrase in the one-pass expression
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


def fold(text: str) -> str:
    """`text` with case folded character by character, the same length as `text`."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


class PhraseSet:
    """Literal phrases and regular expressions, compiled once (see the module docstring)."""

    def __init__(self, phrases: Sequence[Phrase], regexes: Sequence[str] = ()) -> None:
        """Raises ValueError naming a phrase that is empty or a regex that does not
        compile or matches empty text."""
        for i, phrase in enumerate(phrases):
            if not phrase.text:
                raise ValueError(f"phrase {i + 1} is empty")
        self.phrases = tuple(phrases)
        self._folded = tuple(fold(p.text) for p in self.phrases)
        self._regexes = tuple(_compile(r, i) for i, r in enumerate(regexes))
        # Two passes: phrases that must start a word are looked for only where one starts
        # (most positions are inside words), the others everywhere.
        edge = [p.whole_words and is_word_char(p.text[0]) for p in self.phrases]
        self._passes = [
            _Pass(self._folded, [i for i, e in enumerate(edge) if e == starts], lead)
            for starts, lead in ((True, r"(?<!\w)"), (False, ""))
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
            Hit(i, at, end)
            for scan in self._passes
            for i, at, end in self._walk(scan, folded, text, start, len(text))
        ]
        return sorted(hits, key=lambda h: (h.start, h.end, h.phrase))

    def last_found(self, text: str, start: int = 0) -> dict[int, int]:
        """{phrase: where its last occurrence starts} for the phrases that occur at
        `start` or after. Read in chunks from the end back, so that a phrase is looked
        for no further back than its last occurrence (a common word is found at once)."""
        folded = fold(text)
        found: dict[int, int] = {}
        for scan in self._passes:
            index = scan.index
            remaining = dict(index.counts)  # per anchor: its phrases not yet found
            hi, size, left = len(text), CHUNK, len(index.anchor_of)
            while hi > start and left:
                lo = max(start, hi - size)
                latest: dict[int, int] = {}
                for i, at, _ in self._walk(scan, folded, text, lo, hi, remaining):
                    if i not in found:
                        latest[i] = at
                for i, at in latest.items():
                    found[i] = at
                    remaining[index.anchor_of[i]] -= 1
                left -= len(latest)
                hi, size = lo, size * 2
                scan = scan.narrowed(remaining)
        return found

    def _walk(self, scan: _Pass, folded: str, text: str, lo: int, hi: int, remaining=None):
        """(phrase, start, end) of each occurrence of `scan`'s phrases starting in
        [lo, hi), skipping the anchors `remaining` counts none left for."""
        index = scan.index
        if not index.anchor_of:
            return
        for m in scan.rx.finditer(folded, lo):
            at = m.start()
            if at >= hi:
                return
            for anchor in index.chain[m.group(1)]:
                if remaining is not None and not remaining[anchor]:
                    continue
                for i, end in index.matches(anchor, folded, at):
                    if self._holds(i, text, at, end):
                        yield i, at, end

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
        for j, rx in enumerate(self._regexes):
            for m in rx.finditer(text, max(0, cut - REGEX_WINDOW)):
                if m.end() > cut:
                    completed.add(len(self.phrases) + j)
                    break
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
        match running to the text's end), also matches its case and word edges."""
        phrase = self.phrases[i]
        stop = len(text) if end is None else end
        if phrase.case_sensitive and text[start:stop] != phrase.text[: stop - start]:
            return False
        if not phrase.whole_words:
            return True
        if start > 0 and is_word_char(phrase.text[0]) and is_word_char(text[start - 1]):
            return False
        after = end is not None and end < len(text) and is_word_char(text[end])
        return not (after and is_word_char(phrase.text[-1]))


def _compile(pattern: str, i: int) -> re.Pattern[str]:
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"regex {i + 1} ({pattern!r}) is not a valid expression: {e}") from e
    if rx.fullmatch("") is not None:
        raise ValueError(f"regex {i + 1} ({pattern!r}) matches empty text: it would ban all")
    return rx


class _Pass:
    """One pass of `PhraseSet.find`: the phrases `ids`, their anchors as one expression
    (behind `lead`, a condition on where they may start) and their index."""

    def __init__(self, folded: Sequence[str], ids: list[int], lead: str) -> None:
        self.index = _AnchorIndex(folded, ids)
        self.lead, self.anchors = lead, len(self.index.roots)
        self.rx = _anchor_rx(lead, list(self.index.roots))

    def narrowed(self, remaining: dict[str, int]) -> _Pass:
        """This pass looking only for the anchors `remaining` counts phrases left for,
        where they are few (common keys found, a rare one left: the rest of the story is
        then scanned in C with next to no hits); else this pass as it is."""
        left = [anchor for anchor, n in remaining.items() if n]
        if len(left) > NARROW or len(left) * 4 > self.anchors:
            return self
        narrow = copy.copy(self)
        narrow.anchors, narrow.rx = len(left), _anchor_rx(self.lead, left)
        return narrow


def _anchor_rx(lead: str, anchors: list[str]) -> re.Pattern[str]:
    return re.compile(lead + "(?=(" + _trie_pattern(anchors) + "))")


Rests = dict[int, dict[str, list[int]]]  # a phrase's length -> {its text past here: phrases}


class _AnchorIndex:
    """The phrases by anchor (their first ANCHOR folded characters; a shorter phrase is
    its own anchor), two levels deep: the phrases no longer than twice ANCHOR under the
    anchor by their length and the rest of their text, longer ones under the anchor and
    their next ANCHOR characters likewise. Checking a found anchor against its phrases
    then costs a dict lookup per length (few: phrases that agree so far are rare).
      chain[a]     the anchors that are prefixes of `a` (itself included): the one-pass
                   expression reports the longest anchor at a position ("mirabel"), and
                   the shorter ones there ("mira") hold too;
      counts[a]    how many phrases anchor `a` begins;  anchor_of[i]  phrase i's anchor
                   (for the phrases `ids` of the set's `folded` phrases)."""

    def __init__(self, folded: Sequence[str], ids: list[int]) -> None:
        self.roots: dict[str, tuple[Rests, dict[str, Rests]]] = {}
        self.anchor_of = {i: folded[i][:ANCHOR] for i in ids}
        self.counts: dict[str, int] = {}
        for i in ids:
            text, anchor = folded[i], self.anchor_of[i]
            self.counts[anchor] = self.counts.get(anchor, 0) + 1
            near, far = self.roots.setdefault(anchor, ({}, {}))
            if len(text) < 2 * ANCHOR:
                rests, rest = near, text[len(anchor) :]
            else:
                rests, rest = far.setdefault(text[ANCHOR : 2 * ANCHOR], {}), text[2 * ANCHOR :]
            rests.setdefault(len(text), {}).setdefault(rest, []).append(i)
        self.chain = {
            a: tuple(a[:n] for n in range(1, len(a) + 1) if a[:n] in self.roots) for a in self.roots
        }

    def matches(self, anchor: str, folded: str, at: int) -> Iterator[tuple[int, int]]:
        """(phrase, end) of the phrases beginning with `anchor` that `folded` holds at
        `at` (where `anchor` was found)."""
        near, far = self.roots[anchor]
        yield from _rests(near, folded, at, at + len(anchor))
        if far:
            rests = far.get(folded[at + ANCHOR : at + 2 * ANCHOR])
            if rests is not None:
                yield from _rests(rests, folded, at, at + 2 * ANCHOR)


def _rests(rests: Rests, folded: str, at: int, past: int) -> Iterator[tuple[int, int]]:
    for length, by_rest in rests.items():
        for i in by_rest.get(folded[past : at + length], ()):
            yield i, at + length


def _trie_pattern(words: Sequence[str]) -> str:
    """A regular expression matching the longest of `words` at a position, shaped as
    their trie so that `re` walks it instead of trying each word; `(?!)` for none."""
    root: dict = {}
    for word in words:
        node = root
        for c in word:
            node = node.setdefault(c, {})
        node[""] = {}
    if not root:
        return "(?!)"
    # Built bottom-up without recursion: a node's pattern once its children have theirs.
    patterns: dict[int, str] = {}
    stack = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if not ready:
            stack.append((node, True))
            stack.extend((child, False) for c, child in node.items() if c)
            continue
        alts = [re.escape(c) + patterns.pop(id(child)) for c, child in sorted(node.items()) if c]
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")" if alts else ""
        patterns[id(node)] = f"(?:{body})?" if "" in node and body else body
    return patterns[id(root)]


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
