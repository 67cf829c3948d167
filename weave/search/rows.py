"""The rows a writer reads: suggestions that say the same thing shown once, and the
tree's different openings before variations of one.

A search's ranked suggestions (`weave.search.tree.suggestions_from`) can hold texts a
writer reads as one: ` want of a wife,` and ` want of a wife.` (they differ only by
whitespace or their final punctuation), or ` moment` beside ` moment to be able`
(the shorter says nothing the longer does not). Here such texts become one row: the
one shown is the best-scoring of those no other extends, the others are its
`variants`, a hover away, and its probability is theirs together (the tree's leaves
are disjoint continuations). Then the rows are ordered so that each opening (the
first word) leads with its best row before any opening shows a second: the first ten
rows a writer reads are the tree's different openings, not ten variations of one.

Pure: rows in, rows out; the tree keeps every beam (`weave.search.tree`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from weave.search.scores import Score
from weave.search.tree import Suggestion

FINAL_PUNCTUATION = ".,;:!?…\"'’”)»-—– \t\n"


def key(text: str) -> tuple[str, ...]:
    """What a row says, as compared: its words, whitespace and final punctuation aside."""
    return tuple(text.rstrip(FINAL_PUNCTUATION).split())


def opening(text: str) -> str:
    """A row's opening: its first word (case and the punctuation after it aside: "said,"
    and "Said:" open alike), or its text if it has none."""
    words = key(text)
    return (words[0].rstrip(FINAL_PUNCTUATION) or words[0]).casefold() if words else text


@dataclass
class _Row:
    """Suggestions read as one: `shown` the text a writer sees, `members` all of them."""

    shown: Suggestion
    members: list[Suggestion]

    @property
    def key(self) -> tuple[str, ...]:
        return key(self.shown.text)


def distinct_rows(suggestions: list[Suggestion], score: Score) -> list[Suggestion]:
    """`suggestions` (best first) as distinct rows, openings first (the module's note)."""
    rows: dict[tuple[str, ...], _Row] = {}
    for s in suggestions:  # best first: the first of a key is its row's shown text
        row = rows.setdefault(key(s.text), _Row(s, []))
        row.members.append(s)
    folded = _fold_prefixes(list(rows.values()))
    merged = [_merged(row, score) for row in folded]
    merged.sort(key=lambda s: (-s.score, s.text))
    return _openings_first(merged)


def lone(rows: list[Suggestion]) -> Suggestion | None:
    """The row LLooM's rule takes by itself: the only one, standing for no other text (a
    row with variants is a choice the writer may want to make)."""
    return rows[0] if len(rows) == 1 and not rows[0].variants else None


def _fold_prefixes(rows: list[_Row]) -> list[_Row]:
    """Each row whose words begin another's, with nothing after them, joins the best
    such row (rows are best first, so the first found is the best)."""
    kept: list[_Row] = []
    for row in rows:
        longer = next((other for other in rows if _extends(other.key, row.key)), None)
        if longer is None:
            kept.append(row)
        else:
            _longest(longer, rows).members.extend(row.members)
    return kept


def _longest(row: _Row, rows: list[_Row]) -> _Row:
    """The row that `row` ends up in: itself, or the best row extending it, in turn."""
    longer = next((other for other in rows if _extends(other.key, row.key)), None)
    return row if longer is None else _longest(longer, rows)


def _extends(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    """Whether `longer`'s words begin with `shorter`'s (the last one's punctuation aside:
    "infinite" begins "infinite, and")."""
    if not shorter or len(longer) <= len(shorter):
        return False
    last = len(shorter) - 1
    ends_alike = longer[last].rstrip(FINAL_PUNCTUATION) == shorter[last]
    return longer[:last] == shorter[:last] and ends_alike


def _merged(row: _Row, score: Score) -> Suggestion:
    """The row as one suggestion: the shown text's tokens, the members' probability
    summed, the best member's score (joint: the summed probability's log)."""
    if len(row.members) == 1:
        return row.shown
    probability = math.fsum(m.probability for m in row.members)
    logprob = math.log(probability) if probability > 0 else row.shown.logprob
    best = max(m.score for m in row.members)
    variants = tuple(dict.fromkeys(m.text for m in row.members if m.text != row.shown.text))
    return replace(
        row.shown,
        probability=probability,
        logprob=logprob,
        score=logprob if score == "joint" else best,
        variants=variants,
    )


def _openings_first(rows: list[Suggestion]) -> list[Suggestion]:
    """Each opening's best row, best first, then the other rows, best first."""
    seen: set[str] = set()
    first, rest = [], []
    for row in rows:
        start = opening(row.text)
        (rest if start in seen else first).append(row)
        seen.add(start)
    return first + rest
