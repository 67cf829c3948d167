"""One writer's session, without Streamlit: the story, its history and its searches.

The page (`lloom.py`) draws widgets and calls a `Workspace`; everything it does to a
story goes through here, so that it can be tested without a browser. A workspace keeps
the story with its token ids (accepting a suggestion appends the beam's ids; undo
returns to the ids it had), the last few searches keyed by story and parameters (undo
shows the suggestions it had at once), and the last backend error (the story and the
suggestions stay). Saving is the store's (`weave.store`); searching is `weave.search`'s.

`backend_factory` is the one hook for building the shared backend: the page calls
`make_backend`, and page tests set the factory to a fake.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from backends import Backend, BackendError, create_backend
from weave.config import Settings
from weave.search import ProgressCallback, SearchParams, SearchResult, expand
from weave.story import Story
from weave.tree import Suggestion

backend_factory: Callable[[Settings], Backend] = create_backend
_SURROGATE = re.compile("[\ud800-\udfff]")
KEPT_RESULTS = 8  # searches remembered per session (undo and redo show them at once)
AUTO_ACCEPTS = 8  # lone suggestions accepted in a row before the writer is asked again


def make_backend(settings: Settings) -> Backend:
    """The backend the settings choose (or, in page tests, the fake they install)."""
    return backend_factory(settings)


def clean_text(text: str) -> str:
    """Text a tokenizer and a UTF-8 database accept: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class Change:
    """One state of a story in its history: what it says and how it got there."""

    text: str
    token_ids: tuple[int, ...] | None
    kind: str  # "start", "edit", "accept", "undo", "redo", "import"


class Workspace:
    """The story being written, its undo history and its recent searches."""

    def __init__(self) -> None:
        self.story: Story | None = None
        self.history: list[Change] = []
        self.position = -1  # index of the current state in `history`
        self.results: OrderedDict[tuple[str, SearchParams], SearchResult] = OrderedDict()
        self.error: str | None = None
        self.failed: tuple[str, SearchParams] | None = None  # not retried until asked
        self.forced = False  # 'Suggest again': search even where a result is kept
        self.auto_accepted = 0
        self.revision = 0  # bumps on every change, so the page can refresh its widgets

    # -- the story -------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.story is not None

    def start(self, text: str) -> Story:
        self.history, self.position = [], -1
        return self._record(Story(clean_text(text)), "start")

    def edit(self, text: str) -> Story:
        """The writer's own edit (an unchanged text records nothing)."""
        assert self.story is not None, "start a story first"
        text = clean_text(text)
        if text == self.story.text:
            return self.story
        self.auto_accepted = 0
        return self._record(self.story.edited(text), "edit")

    def accept(self, suggestion: Suggestion, shown: str | None, *, prefix_space: bool) -> Story:
        """Append a suggestion as shown (maybe edited) on the page."""
        assert self.story is not None, "start a story first"
        shown = None if shown is None else clean_text(shown)
        story = self.story.accept(suggestion, shown, prefix_space=prefix_space)
        return self._record(story, "accept")

    def undo(self) -> Story | None:
        if not self.can_undo:
            return None
        self.position -= 1
        return self._restore()

    def redo(self) -> Story | None:
        if not self.can_redo:
            return None
        self.position += 1
        return self._restore()

    @property
    def can_undo(self) -> bool:
        return self.position > 0

    @property
    def can_redo(self) -> bool:
        return 0 <= self.position < len(self.history) - 1

    def _record(self, story: Story, kind: str) -> Story:
        del self.history[self.position + 1 :]  # a change after an undo drops the redo branch
        self.history.append(Change(story.text, story.token_ids, kind))
        self.position = len(self.history) - 1
        return self._set(story)

    def _restore(self) -> Story:
        change = self.history[self.position]
        self.auto_accepted = 0
        return self._set(Story(change.text, change.token_ids))

    def _set(self, story: Story) -> Story:
        self.story = story
        self.error, self.failed = None, None
        self.revision += 1
        return story

    # -- searching -------------------------------------------------------------------
    def result_for(self, params: SearchParams) -> SearchResult | None:
        """The search already run for this story and these parameters, if any."""
        if self.story is None:
            return None
        return self.results.get((self.story.text, params))

    def needs_search(self, params: SearchParams) -> bool:
        if self.story is None or not self.story.text:
            return False
        key = (self.story.text, params)
        return self.forced or (key not in self.results and key != self.failed)

    def suggest(
        self, backend: Backend, params: SearchParams, progress: ProgressCallback | None = None
    ) -> SearchResult | None:
        """Search after the story; on a backend error keep everything and remember why.

        Returns the result, or None when the search failed (see `error`).
        """
        assert self.story is not None, "start a story first"
        key, self.forced = (self.story.text, params), False
        try:
            self.story = self.story.tokenized(backend)
            self._keep_ids()
            result = expand(backend, list(self.story.token_ids or ()), params, progress=progress)
        except (BackendError, ValueError) as e:
            self.error, self.failed = str(e), key
            return None
        self.error, self.failed = None, None
        self.results[key] = result
        self.results.move_to_end(key)
        while len(self.results) > KEPT_RESULTS:
            self.results.popitem(last=False)
        return result

    def retry(self) -> None:
        """'Suggest again': search once more; the suggestions shown stay until it succeeds."""
        self.forced, self.failed = True, None
        self.auto_accepted = 0

    def take_lone(self, result: SearchResult, *, prefix_space: bool) -> bool:
        """Accept a lone suggestion by itself (LLooM's rule), a few times in a row at most."""
        if len(result.suggestions) != 1 or self.auto_accepted >= AUTO_ACCEPTS:
            return False
        self.auto_accepted += 1
        self.accept(result.suggestions[0], None, prefix_space=prefix_space)
        return True

    def last_result(self) -> SearchResult | None:
        """The most recent search of any story state (shown while a new one fails)."""
        return next(reversed(self.results.values()), None)

    def _keep_ids(self) -> None:
        """Remember the story's ids in its history entry, so undo can hand them back."""
        change = self.history[self.position]
        if change.text == self.story.text and change.token_ids is None:
            self.history[self.position] = replace(change, token_ids=self.story.token_ids)
