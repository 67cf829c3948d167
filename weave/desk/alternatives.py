"""The model's alternatives at the story's last tokens at a node, and branching from one.

`alternatives_at` asks the backend what it offered at each of the story's last tokens
under the context the node's searches send (memory, lore and note are read, never
branched at: `weave.story.model_context.story_alternatives`), and answers `Alternatives`:
the rows from the first that begins a word (a window of tokens may begin inside one:
"ara had kept…"), or why there are none. `whole_words` reads each alternative that ends in
a letter on to its word's end, the model's likeliest way (" sh" is " shrugged"), so that a
writer picks words, not word-pieces. `branch_text` is the story a loom edit branches with
when the writer picks one, `story_before` the story up to its token. The context comes from
the tab's memo (`weave.desk.offers.Offers.alternatives`); this module keeps nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backends.base import Backend, TokenAlternatives
from backends.errors import BackendError
from weave.story.context import Context
from weave.story.model_context import story_alternatives

WORD_TOKENS = 4  # tokens an alternative is read on by, at most, to its word's end


@dataclass(frozen=True)
class Choice:
    """One alternative at a story token as the writer picks it: the token the model
    offered (`token_id`, its `logprob`) and its `text` read on to the end of the word it
    begins."""

    token_id: int
    text: str
    logprob: float


@dataclass(frozen=True)
class Alternatives:
    """What the model offered at the last tokens of the story at a node: `rows`, else why
    there are none (`unsupported`: the backend cannot say; `error`: what failed)."""

    story_id: str
    node_id: str
    rows: tuple[TokenAlternatives, ...] = ()
    unsupported: bool = False
    error: str | None = None

    def failed(self, error: str) -> Alternatives:
        return Alternatives(self.story_id, self.node_id, error=error)

    def row_at(self, position: int | None) -> TokenAlternatives:
        """The row of the story token at `position` (an index into the ids asked about);
        the last token's when no row is there (None, or a position outside the window)."""
        assert self.rows, "no rows: the alternatives are unsupported or failed"
        return next((row for row in self.rows if row.position == position), self.rows[-1])


def story_before(text: str, rows: Sequence[TokenAlternatives], at: TokenAlternatives) -> str:
    """The story up to the token `at`: where another token there would go (`branch_text`),
    and what the bans read before it (`page.bans.banned_alternatives`).

    Args:
        text: the story's text.
        rows: `Backend.alternatives` for the story's ids, through its last token (their
            texts join to the story's end).
        at: the row of the token.
    Raises:
        ValueError: when the rows' texts are not the end of `text` (another story's).
    """
    tail = "".join(row.text for row in rows if row.position >= at.position)
    if not text.endswith(tail):
        raise ValueError("these alternatives belong to another text than the story's")
    return text[: len(text) - len(tail)]


def branch_text(
    text: str, rows: Sequence[TokenAlternatives], at: TokenAlternatives, choice: Choice
) -> str:
    """The story up to the token `at` (`story_before`), then `choice`, one of its
    alternatives, in its place: what a loom edit branches with when the writer picks
    another token there. Raises ValueError as `story_before` does."""
    return story_before(text, rows, at) + choice.text


def alternatives_at(
    backend: Backend, context: Context, story_id: str, node_id: str, *, k: int, last: int
) -> Alternatives:
    """What the model offered (its top `k`) at the last `last` story tokens of `context`,
    the context of node `node_id` of story `story_id`; a backend's failure is kept in
    `error`, never raised."""
    where = (story_id, node_id)
    try:
        rows = story_alternatives(backend, context, k, last=last)
    except (BackendError, ValueError) as e:
        return Alternatives(*where, error=str(e))
    if rows is None:
        return Alternatives(*where, unsupported=True)
    return Alternatives(*where, rows=tuple(from_a_word(rows, context.prefix_len)))


def from_a_word(rows: Sequence[TokenAlternatives], story_start: int) -> Sequence[TokenAlternatives]:
    """The rows from the first whose token begins a word: the story's first token (at
    position `story_start`), one that begins with whitespace or follows a row that ends
    with it (all of them where none does)."""
    begins = (i for i, row in enumerate(rows)
              if row.position == story_start or row.text[:1].isspace()
              or (i and rows[i - 1].text[-1:].isspace()))  # fmt: skip
    return rows[next(begins, 0) :]


def whole_words(
    backend: Backend, ids: Sequence[int], row: TokenAlternatives, *, most: int = WORD_TOKENS
) -> tuple[Choice, ...]:
    """The alternatives of `row` (a row of `ids`, the context its alternatives were asked
    for) as choices, each that ends in a letter read on by the model's likeliest tokens
    while they continue its word (at most `most`): one `top_logprobs` call a token for
    all of them. Raises `BackendError`."""
    before = list(ids[: row.position])
    texts = {i: c.text for i, c in enumerate(row.top)}
    going = {i: [c.token_id] for i, c in enumerate(row.top) if c.text[-1:].isalpha()}
    for _ in range(most):
        if not going:
            break
        asked = list(going)
        answers = backend.top_logprobs([before + going[i] for i in asked], 1)
        for i, top in zip(asked, answers, strict=True):
            if not top or not top[0].text[:1].isalpha():  # a space, a mark: the word ended
                del going[i]
                continue
            texts[i] += top[0].text
            going[i].append(top[0].token_id)
    return tuple(Choice(c.token_id, texts[i], c.logprob) for i, c in enumerate(row.top))
