"""Token healing: a story that ends inside a word, or with whitespace, is searched from
the last token boundary before that word (or whitespace), and the first tokens searched
are held to what the writer typed after it.

A tokenizer reads "…opened its ey" as "… its", " ey": a model asked what follows " ey"
offers what follows that rare token ("ery", "ries"), not the rest of "eyes", and after a
trailing space it offers what follows a lone space token (digits, a second space). Here
the story is searched from "… its" instead, and a token is allowed only where its bytes
agree with the typed remainder " ey": it starts with " ey" (" eyes") or is a start of it
(" e", after which the next token must go on with "y"). Once a beam has spelled the
remainder, the search is free again, and what a writer is shown is what follows the
typed text ("es and looked up,").

This module is pure: `heal` reads a story's ids through a tokenizer's `detokenize` (and
`tokenize`, for a backend whose ids are whole texts) and returns a `Healing`; the
search (`weave.search`) and the draw (`weave.search.ramify`) apply its `Constraint` to the
candidates a backend returns (`narrowed`). It asks no model anything. How many
candidates a healed depth asks for is each backend's (`Backend.heal_k`): all of them on
MLX, where the allowed tokens' probabilities are then exactly the model's, renormalised.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from backends.base import Candidate

MAX_BACKOFF = 4  # story tokens at most given back: a longer word is healed from its end
WINDOW = 8  # story tokens read to find the boundary (a few more than backed off)


@dataclass(frozen=True)
class Constraint:
    """The typed remainder a beam's first bytes must agree with."""

    typed: bytes

    def active(self, done: bytes) -> bool:
        """Whether a beam that spelled `done` so far is still inside the remainder."""
        return len(done) < len(self.typed)

    def allows(self, done: bytes, piece: bytes) -> bool:
        """Whether a beam that spelled `done` may go on with `piece`: the two agree with
        the remainder as far as both go. An empty piece spells nothing, and is refused."""
        if not piece:
            return False
        after = done + piece
        common = min(len(after), len(self.typed))
        return after[:common] == self.typed[:common]


@dataclass(frozen=True)
class Healing:
    """Where a story is searched from, and what was typed after it.

    `context` is the story's ids up to the boundary; `typed` the text after it, which
    every suggestion starts with (and is shown without); `tokens` how many of the
    story's ids the boundary gave back (a suggestion's ids replace those)."""

    context: tuple[int, ...]
    typed: str
    tokens: int

    @property
    def constraint(self) -> Constraint:
        return Constraint(self.typed.encode("utf-8"))


def typed_start(text: str) -> int | None:
    """Where the end of `text` that a writer may still be typing begins: its trailing
    whitespace, or its last word (letters and digits, with the space before it); None
    when the text ends otherwise (a full stop, a comma, a quote) or is nothing but that."""
    end = len(text)
    start = end
    if text[-1:].isspace():
        while start > 0 and text[start - 1].isspace():
            start -= 1
    elif text[-1:].isalnum():
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        if start > 0 and text[start - 1] == " ":
            start -= 1  # a word's space belongs to its token (" eyes")
    else:
        return None
    return start if start > 0 else None


def heal(
    ids: Sequence[int],
    detokenize: Callable[[list[int]], str],
    tokenize: Callable[[str], list[int]],
) -> Healing | None:
    """The healing of a story whose ids (its steering first) are `ids`, or None where the
    story ends at no word or whitespace (or nothing would be left to search from).

    The boundary is the last token boundary at or before where the typed end begins
    (`typed_start`), at most MAX_BACKOFF tokens back; when none is (a word longer than
    that), the boundary MAX_BACKOFF tokens back. A backend whose one id holds the whole
    story (a text API) has no boundary inside it: its text before the typed end is
    tokenized afresh.
    """
    n = len(ids)
    first = max(0, n - WINDOW)
    head = list(ids[first:])
    text = detokenize(head)
    start = typed_start(text)
    if start is None:
        return None
    for boundary in range(n - 1, max(first, n - MAX_BACKOFF - 1), -1):
        before = detokenize(head[: boundary - first]) if boundary > first else ""
        if not text.startswith(before):
            continue  # a boundary inside a character: its text is not the story's
        if len(before) <= start or boundary == n - MAX_BACKOFF:
            return Healing(tuple(ids[:boundary]), text[len(before) :], n - boundary)
    if first == 0 and len(head) == 1:  # one id for the whole text: cut the text instead
        context = tokenize(text[:start])
        return Healing(tuple(context), text[start:], 1) if context else None
    return None


def narrowed(
    constraint: Constraint, done: bytes, options: Sequence[Candidate], k: int
) -> list[Candidate]:
    """The `k` likeliest of `options` (a beam's candidates, most likely first) that the
    constraint allows after `done`, their log-probabilities renormalised over the
    allowed ones: the model's distribution given that the text agrees with what was
    typed (exact where `options` hold the whole vocabulary)."""
    want = constraint.typed[len(done) :]  # `done` agrees with the typed text: the rest
    allowed = [  # `allows`, in the form that is quick over a whole vocabulary
        c for c in options if (p := c.piece) and (p.startswith(want) or want.startswith(p))
    ]
    if not allowed:
        return []
    top = max(c.logprob for c in allowed)
    total = top + math.log(sum(math.exp(c.logprob - top) for c in allowed))
    return [replace(c, logprob=c.logprob - total) for c in allowed[:k]]
