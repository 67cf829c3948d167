"""Taking part of a suggestion: its text up to the end of a word, and the rest offered after.

A row's words (`word_ends`) are where a take may end: a word is a run of letters and
digits (with the apostrophes and hyphens inside it) or a run of punctuation, each with
the whitespace before it, so ` want of a wife, and` ends after ` want`, ` of`, ` a`,
` wife`, `,` and ` and`; whitespace at the end goes with the last word.

An `Offered` is a row a writer may take whole (its `piece`) or up to a word: `up_to(end)`
is the piece that takes the text up to `end`, `after(end, node_id)` the rest, offered at
the node the first part made (`beside` the suggestions there, unless one holds it). The
part keeps its token ids where the cut falls on a token boundary (the loom's nodes carry
ids as a cache), else it is text only; a healed suggestion's ids begin inside the story
and are never kept. Either part is recorded as a "partial suggestion"
(`weave.loom.provenance`): the rank it was offered at, the probability of its own
tokens. Values only: `weave.desk.session` takes the pieces, the page draws the rows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from weave.desk.spot import Piece
from weave.loom.provenance import probability
from weave.search.rows import distinct_rows
from weave.search.tree import Suggestion

WORD = re.compile(r"\s*(?:\w+(?:['’-]\w+)*|[^\w\s]+)")


def word_ends(text: str) -> tuple[int, ...]:
    """Where a take of `text` may end: after each word (the module's note); the last is
    the whole text."""
    ends = [m.end() for m in WORD.finditer(text)]
    if ends:
        ends[-1] = len(text)
    elif text:
        ends = [len(text)]
    return tuple(ends)


def beside(rest: Offered | None, suggestions: list[Suggestion]) -> Offered | None:
    """The rest of a row, to offer beside a search's `suggestions` at its node: None where
    the rows rule would make it one of theirs (`weave.search.rows`: one reads the same,
    or goes on from its words), which offers it already."""
    text = rest.suggestion.text if rest is not None else None
    if text is None or any(s.text == text for s in suggestions):
        return None
    rows = distinct_rows([*suggestions, rest.suggestion], "joint")  # theirs first: shown
    return rest if any(row.text == text for row in rows) else None


@dataclass(frozen=True)
class Offered:
    """A row a writer may take whole or up to a word: `piece` takes it whole, and
    `suggestion` holds its text's tokens (their texts and log-probabilities shade the
    row; its ids are known when there is one per token text and it is not healed)."""

    piece: Piece
    suggestion: Suggestion

    def up_to(self, end: int) -> Piece:
        """The piece that takes the text up to `end` (0 < end <= its length)."""
        text = self.suggestion.text
        if not 0 < end <= len(text):
            raise ValueError(f"a part ends inside the text (1..{len(text)}), not at {end}")
        if end == len(text):
            return self.piece
        k = self._boundary(end)
        ids = self.suggestion.token_ids[:k] if k is not None else ()
        return self._part(self.piece.node_id, text[:end], ids, self._logprob(0, end))

    def after(self, end: int, node_id: str) -> Offered | None:
        """The text after `end` as a row offered at `node_id` (None when nothing is left):
        its ids where the cut falls on a token boundary and the suggestion's ids spell it."""
        s = self.suggestion
        if not 0 < end < len(s.text):
            return None
        rest, spans = s.text[end:], _spans(s)
        first = next((i for i, span in enumerate(spans) if span.end > end), len(spans))
        if first < len(spans) and spans[first].whole:  # the token the cut falls in, or after
            cut = s.token_pieces[first][end - spans[first].start :]
            pieces, logprobs = (cut, *s.token_pieces[first + 1 :]), s.token_logprobs[first:]
        else:  # past the tokens that spell the text one by one: the rest is one span
            pieces, logprobs = (rest,), (math.fsum(s.token_logprobs[first:]),)
        k = self._boundary(end)
        ids = s.token_ids[k:] if k is not None and s.exact else ()
        logprob = self._logprob(end, len(s.text))
        shown = Suggestion(text=rest, token_ids=ids, logprob=logprob, probability=math.exp(logprob),
                           score=logprob, token_pieces=pieces, token_logprobs=logprobs,
                           exact=bool(ids))  # fmt: skip
        return Offered(self._part(node_id, rest, ids, logprob), shown)

    def _boundary(self, end: int) -> int | None:
        """How many tokens spell the text up to `end` exactly, when their ids are known."""
        s = self.suggestion
        if s.healed or len(s.token_ids) != len(s.token_pieces):
            return None
        return next((i + 1 for i, span in enumerate(_spans(s)) if span.whole and span.end == end),
                    None)  # fmt: skip

    def _logprob(self, start: int, end: int) -> float:
        """The log-probability of the tokens whose text lies (in part) in [start, end);
        from the start, a healed suggestion's tokens of the typed text too."""
        spans = _spans(self.suggestion)
        return math.fsum(lp for span, lp in zip(spans, self.suggestion.token_logprobs, strict=True)
                         if span.start < end and (span.end > start or start == 0))  # fmt: skip

    def _part(self, node_id: str, text: str, ids: tuple[int, ...], logprob: float) -> Piece:
        """A part of the row as a piece to take at `node_id`: its own probability."""
        made = self.piece.provenance
        if made is not None:
            made = replace(made, how="partial suggestion", probability=probability(logprob))
        return replace(self.piece, node_id=node_id, text=text, token_ids=ids, exact=bool(ids),
                       score=logprob, provenance=made)  # fmt: skip


@dataclass(frozen=True)
class _Span:
    """Where a token's text lies in a suggestion's text; `whole` when it is exactly there."""

    start: int
    end: int
    whole: bool


def _spans(s: Suggestion) -> list[_Span]:
    """Each token's place in the text, matched in order; from the first token that does not
    match (half a character, or cut by auto-stop) on, they share the rest of the text (as
    `weave.view.present.token_spans` shows them)."""
    spans, at = [], 0
    for piece in s.token_pieces:
        whole = (not spans or spans[-1].whole) and s.text.startswith(piece, at)
        spans.append(_Span(at, at + len(piece), True) if whole else _Span(at, len(s.text), False))
        at += len(piece) if whole else 0
    return spans
