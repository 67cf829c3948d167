"""The story as the engine holds it: text plus the token ids that spell it.

Ids travel with the text so that accepting a suggestion appends the beam's own ids
(whose KV the MLX backend already holds) instead of re-tokenizing; any other change
re-tokenizes, and the backend reuses the longest common prefix. This module owns that
rule, LLooM's "prefix space" rule for showing and accepting suggestions (`weave.tree`
pools suggestions by it) and the text of a branch at another token (`branch_text`); it
stores nothing (`weave.loom_store` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backends.base import Backend, Candidate, TokenAlternatives
from weave.tree import Suggestion, without_prefix_space


@dataclass(frozen=True)
class Story:
    text: str
    token_ids: tuple[int, ...] | None = None  # None: not tokenized for this backend yet

    def ids_for(self, backend: Backend) -> list[int]:
        """The story's ids, tokenizing only when no exact ids are known."""
        if self.token_ids is not None:
            return list(self.token_ids)
        return backend.tokenize(self.text)

    def tokenized(self, backend: Backend) -> Story:
        return Story(self.text, tuple(self.ids_for(backend)))

    def edited(self, text: str) -> Story:
        """A writer's edit: the text changes and the ids must be found again."""
        return self if text == self.text else Story(text)

    def accept(self, suggestion: Suggestion, shown: str | None = None, *, prefix_space=True):
        """Append a suggestion; `shown` is its text as displayed (and maybe edited) on the page.

        When the writer accepted it unchanged and it is exact, its ids are appended as
        they are; otherwise the new text is tokenized afresh on the next search.
        """
        text = accepted_text(suggestion, shown, prefix_space=prefix_space)
        unchanged = text == suggestion.text and suggestion.exact
        if unchanged and self.token_ids is not None:
            return Story(self.text + text, self.token_ids + suggestion.token_ids)
        return Story(self.text + text)


def display_text(suggestion: Suggestion) -> str:
    """LLooM's prefix space: suggestions are shown without their leading space."""
    return without_prefix_space(suggestion.text)


def accepted_text(suggestion: Suggestion, shown: str | None, *, prefix_space: bool) -> str:
    """The text appended when a (possibly edited) suggestion is accepted.

    The leading space taken off for display comes back when the suggestion had one and
    "prefix space" is on.
    """
    if shown is None:
        return suggestion.text
    space = " " if prefix_space and suggestion.text.startswith(" ") else ""
    return space + shown


def branch_text(
    text: str, rows: Sequence[TokenAlternatives], at: TokenAlternatives, choice: Candidate
) -> str:
    """The story up to the token `at`, then `choice` in its place: what a loom edit
    branches with when the writer picks another token there.

    Args:
        text: the story's text.
        rows: `Backend.alternatives` for the story's ids, through its last token (their
            texts join to the story's end).
        at: the row of the token replaced; choice: one of its alternatives.
    Raises:
        ValueError: when the rows' texts are not the end of `text` (another story's).
    """
    tail = "".join(row.text for row in rows if row.position >= at.position)
    if not text.endswith(tail):
        raise ValueError("these alternatives belong to another text than the story's")
    return text[: len(text) - len(tail)] + choice.text
