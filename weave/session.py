"""One writer's session, without Streamlit: the story, its history, its searches, saving.

The page (`lloom.py`) draws widgets and calls a `Workspace`; everything it does to a
story goes through here, so that it can be tested without a browser. A workspace keeps
the story with its token ids (accepting a suggestion appends the beam's ids; undo
returns to the ids it had), the last few searches keyed by story and parameters (undo
shows the suggestions it had at once) and the last backend error (the story and the
suggestions stay). Every change is saved at once into a `Book`: the SQLite store
(`weave.store`) where it opens, else `MemoryBook`, which keeps stories for this process
only. Searching is `weave.search`'s; drawing is the page's.

`backend_factory` is the one hook for building the shared backend: the page calls
`make_backend`, and page tests set the factory to a fake.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

from backends import Backend, BackendError, create_backend
from weave.config import Settings
from weave.finite import non_finite
from weave.search import ProgressCallback, SearchParams, SearchResult, SearchStats, expand
from weave.story import Story
from weave.tree import Suggestion, TreeNode

backend_factory: Callable[[Settings], Backend] = create_backend
KEPT_RESULTS = 8  # searches remembered per session (undo and redo show them at once)
AUTO_ACCEPTS = 8  # lone suggestions accepted in a row before the writer is asked again
TITLE_CHARS = 48
SESSION_FORMAT = "lloom-session"
_SURROGATE = re.compile("[\ud800-\udfff]")


def make_backend(settings: Settings) -> Backend:
    """The backend the settings choose (or, in page tests, the fake they install)."""
    return backend_factory(settings)


def clean_text(text: str) -> str:
    """Text a tokenizer and a UTF-8 database accept: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def title_for(text: str) -> str:
    """A story's default title: its first words."""
    words = " ".join(text.split())
    return words if len(words) <= TITLE_CHARS else words[: TITLE_CHARS - 1] + "…"


# -- what a book holds --------------------------------------------------------------------
class BookError(RuntimeError):
    """The book could not load or save: says what failed and where."""


@dataclass(frozen=True)
class Change:
    """One state of a story in its history: what it says and how it got there."""

    text: str
    kind: str  # "start", "edit", "accept", "import"
    token_ids: tuple[int, ...] | None = None  # in memory only: ids are the backend's


@dataclass(frozen=True)
class Entry:
    """A story as a list shows it."""

    id: str
    title: str
    updated: float  # seconds since the epoch
    deleted: bool = False


@dataclass(frozen=True)
class Saved:
    """A story as the book returns it: its history, where it stands, and what went with it."""

    id: str
    title: str
    history: tuple[Change, ...]
    position: int
    settings: dict = field(default_factory=dict)
    search: dict | None = None  # `search_to_dict`'s form


class Book(Protocol):
    """Where stories are kept. Every method raises `BookError` when it cannot do its job."""

    location: str | None  # a folder, or None when stories live in memory only

    def create(self, text: str, *, kind: str = "start", title: str | None = None) -> str: ...
    def record(self, story_id: str, text: str, kind: str) -> None: ...
    def move(self, story_id: str, position: int) -> None: ...
    def load(self, story_id: str) -> Saved | None: ...
    def stories(self, *, deleted: bool = False) -> list[Entry]: ...
    def rename(self, story_id: str, title: str) -> None: ...
    def delete(self, story_id: str) -> None: ...
    def restore(self, story_id: str) -> None: ...
    def purge(self, story_id: str) -> None: ...
    def save_settings(self, story_id: str, settings: dict) -> None: ...
    def save_search(self, story_id: str, search: dict) -> None: ...


class MemoryBook:
    """Stories kept in this process only (when no store can open)."""

    location = None

    def __init__(self) -> None:
        self._stories: dict[str, dict[str, Any]] = {}

    def create(self, text: str, *, kind: str = "start", title: str | None = None) -> str:
        story_id = uuid.uuid4().hex[:12]
        self._stories[story_id] = {
            "title": title or title_for(text), "history": [Change(text, kind)], "position": 0,
            "settings": {}, "search": None, "updated": time.time(), "deleted": False,
        }  # fmt: skip
        return story_id

    def record(self, story_id: str, text: str, kind: str) -> None:
        story = self._get(story_id)
        del story["history"][story["position"] + 1 :]
        story["history"].append(Change(text, kind))
        story["position"] = len(story["history"]) - 1
        story["updated"] = time.time()

    def move(self, story_id: str, position: int) -> None:
        story = self._get(story_id)
        if not 0 <= position < len(story["history"]):
            raise BookError(f"story {story_id} has no state {position}")
        story["position"], story["updated"] = position, time.time()

    def load(self, story_id: str) -> Saved | None:
        story = self._stories.get(story_id)
        if story is None:
            return None
        return Saved(story_id, story["title"], tuple(story["history"]), story["position"],
                     dict(story["settings"]), story["search"])  # fmt: skip

    def stories(self, *, deleted: bool = False) -> list[Entry]:
        entries = [
            Entry(story_id, s["title"], s["updated"], s["deleted"])
            for story_id, s in self._stories.items()
            if s["deleted"] == deleted
        ]
        return sorted(entries, key=lambda e: -e.updated)

    def rename(self, story_id: str, title: str) -> None:
        self._get(story_id)["title"] = title

    def delete(self, story_id: str) -> None:
        self._get(story_id)["deleted"] = True

    def restore(self, story_id: str) -> None:
        self._get(story_id)["deleted"] = False

    def purge(self, story_id: str) -> None:
        if not self._get(story_id)["deleted"]:
            raise BookError("only a deleted story can be purged")
        del self._stories[story_id]

    def save_settings(self, story_id: str, settings: dict) -> None:
        self._get(story_id)["settings"] = dict(settings)

    def save_search(self, story_id: str, search: dict) -> None:
        self._get(story_id)["search"] = search

    def _get(self, story_id: str) -> dict[str, Any]:
        try:
            return self._stories[story_id]
        except KeyError:
            raise BookError(f"no story {story_id} in memory") from None


def open_book(data_dir: Path) -> tuple[Book, str | None]:
    """The story store in `data_dir`; where it cannot open, memory and the reason why."""
    from weave.store import Store  # late: the store builds on this module's types

    try:
        return Store(data_dir), None
    except BookError as e:
        return MemoryBook(), str(e)


# -- the workspace ------------------------------------------------------------------------
class Workspace:
    """The story being written, its undo history and its recent searches.

    Every change is saved at once into `book`. A failure to save is kept in
    `save_error` and never raised: the change stays in memory and the page says so.
    """

    def __init__(self, book: Book | None = None) -> None:
        self.book: Book = book if book is not None else MemoryBook()
        self.story: Story | None = None
        self.story_id: str | None = None
        self.title = ""
        self.save_error: str | None = None
        self.revision = 0  # bumps on every change, so the page can refresh its widgets
        self._clear()

    def _clear(self) -> None:
        self.history: list[Change] = []
        self.position = -1  # index of the current state in `history`
        self.settings: dict = {}
        self.results: OrderedDict[tuple[str, SearchParams], SearchResult] = OrderedDict()
        self.error: str | None = None
        self.notice: str | None = None  # something opened is not shown, and why
        self.failed: tuple[str, SearchParams] | None = None  # not retried until asked
        self.forced = False  # 'Suggest again': search even where a result is kept
        self.auto_accepted = 0

    # -- opening and closing ----------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.story is not None

    def start(self, text: str, *, kind: str = "start") -> Story:
        """A new story, saved at once as a new entry of the book."""
        text = clean_text(text)
        self._clear()
        self.story_id = self._save(lambda: self.book.create(text, kind=kind))
        self.title = title_for(text)
        self.history, self.position = [Change(text, kind)], 0
        return self._set(Story(text))

    def open(self, story_id: str, *, model: str | None = None) -> bool:
        """Reopen a saved story with its history, settings and last search.

        The last search comes back only when `model` made it (else the page searches).
        Returns False when the book has no such story (or cannot read it: `save_error`).
        """
        saved = self._save(lambda: self._load(story_id))
        if saved is None or not saved.history:
            return False
        self._clear()
        self.story_id, self.title = saved.id, saved.title
        self.history = [Change(clean_text(c.text), c.kind) for c in saved.history]
        self.position = min(max(saved.position, 0), len(self.history) - 1)
        self.settings = dict(saved.settings)
        self.auto_accepted = AUTO_ACCEPTS  # reopening changes nothing by itself
        self._set(Story(self.history[self.position].text))
        restored = search_from_dict(saved.search) if saved.search else None
        self.notice = _unshowable(saved.search, "The saved suggestions")
        if restored is not None and restored[0].stats.model == model:
            result, params = restored
            self.results[(self.story.text, params)] = result
        return True

    def _load(self, story_id: str) -> Saved | None:
        try:
            return self.book.load(story_id)
        except ValueError as e:  # a damaged entry (its JSON, say): say so, open nothing
            raise BookError(f"story {story_id} cannot be read: {e}") from e

    def close(self) -> None:
        """Back to the start page; the story stays saved."""
        self._clear()
        self.story, self.story_id, self.title = None, None, ""
        self.revision += 1

    # -- changing the story -------------------------------------------------------------
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
        self.auto_accepted = 0
        return self._record(story, "accept")

    def undo(self) -> Story | None:
        return self._move(self.position - 1) if self.can_undo else None

    def redo(self) -> Story | None:
        return self._move(self.position + 1) if self.can_redo else None

    @property
    def can_undo(self) -> bool:
        return self.position > 0

    @property
    def can_redo(self) -> bool:
        return 0 <= self.position < len(self.history) - 1

    def rename(self, title: str) -> None:
        title = clean_text(title).strip() or title_for(self.story.text if self.story else "")
        self.title = title
        if self.story_id is not None:
            self._save(lambda: self.book.rename(self.story_id, title))

    # -- the book's other stories --------------------------------------------------------
    def stories(self, *, deleted: bool = False) -> list[Entry]:
        return self._save(lambda: self.book.stories(deleted=deleted)) or []

    def delete(self, story_id: str) -> None:
        """Move a story to the deleted ones (recoverable until purged)."""
        self._save(lambda: self.book.delete(story_id))

    def restore(self, story_id: str) -> None:
        self._save(lambda: self.book.restore(story_id))

    def purge(self, story_id: str) -> None:
        """Remove a deleted story for good."""
        self._save(lambda: self.book.purge(story_id))

    def import_session(self, data: bytes | str, *, model: str | None = None) -> str | None:
        """Open a session exported by `export_session` as a new story.

        Returns None when it worked, else what is wrong with the file.
        """
        try:
            story_id = import_session(self.book, data)
        except (ValueError, BookError) as e:
            return str(e)
        self.open(story_id, model=model)
        self.notice = _unshowable(json.loads(data).get("search"), "The file's suggestions")
        return None

    def remember_settings(self, settings: dict) -> None:
        """Save the story's search settings when they changed."""
        if settings != self.settings and self.story_id is not None:
            self.settings = dict(settings)
            self._save(lambda: self.book.save_settings(self.story_id, settings))

    def _record(self, story: Story, kind: str) -> Story:
        del self.history[self.position + 1 :]  # a change after an undo drops the redo branch
        self.history.append(Change(story.text, kind, story.token_ids))
        self.position = len(self.history) - 1
        if self.story_id is not None:
            self._save(lambda: self.book.record(self.story_id, story.text, kind))
        else:  # the book could not take the story when it began: offer it again now
            self.story_id = self._save(lambda: self.book.create(story.text, kind=kind))
            if self.story_id is not None and self.title:
                self._save(lambda: self.book.rename(self.story_id, self.title))
        return self._set(story)

    def _move(self, position: int) -> Story:
        self.position = position
        if self.story_id is not None:
            self._save(lambda: self.book.move(self.story_id, position))
        change = self.history[position]
        self.auto_accepted = AUTO_ACCEPTS  # going back is deliberate: no lone accept undoes it
        return self._set(Story(change.text, change.token_ids))

    def _set(self, story: Story) -> Story:
        self.story = story
        self.error, self.failed = None, None
        self.revision += 1
        return story

    def _save(self, action: Callable[[], Any]) -> Any:
        """Run a book action; a failure is kept in `save_error`, never raised."""
        try:
            value = action()
        except BookError as e:
            self.save_error = str(e)
            return None
        self.save_error = None
        return value

    # -- searching ----------------------------------------------------------------------
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
        if self.story_id is not None:
            self._save(lambda: self.book.save_search(self.story_id, search_to_dict(result, params)))
        return result

    def retry(self) -> None:
        """'Suggest again': search once more; the suggestions shown stay until it succeeds."""
        self.forced, self.failed = True, None
        self.auto_accepted = 0

    def take_lone(self, result: SearchResult, *, prefix_space: bool) -> bool:
        """Accept a lone suggestion by itself (LLooM's rule), a few times in a row at most."""
        if len(result.suggestions) != 1 or self.auto_accepted >= AUTO_ACCEPTS:
            return False
        taken = self.auto_accepted + 1
        self.accept(result.suggestions[0], None, prefix_space=prefix_space)
        self.auto_accepted = taken
        return True

    def last_result(self) -> SearchResult | None:
        """The most recent search of any story state (shown while a new one fails)."""
        return next(reversed(self.results.values()), None)

    def _keep_ids(self) -> None:
        """Remember the story's ids in its history entry, so undo can hand them back."""
        change = self.history[self.position]
        if change.text == self.story.text and change.token_ids is None:
            self.history[self.position] = replace(change, token_ids=self.story.token_ids)


# -- searches as JSON ---------------------------------------------------------------------
def search_to_dict(result: SearchResult, params: SearchParams) -> dict:
    """A search as JSON: parameters, stats, the ranked suggestions and the whole tree."""
    return {
        "params": asdict(params),
        "stats": result.stats.to_dict(),
        "suggestions": [asdict(s) for s in result.suggestions],
        "tree": result.tree.to_dict(),
        "context_tokens": len(result.context_ids),
    }


def search_from_dict(data: dict) -> tuple[SearchResult, SearchParams] | None:
    """`search_to_dict`'s inverse; None when the data is not a search we can show
    (one holding NaN or an infinity, say)."""
    if non_finite(data):
        return None
    try:
        params = SearchParams(**_known(SearchParams, data["params"]))
        suggestions = [_suggestion(s) for s in data["suggestions"]]
        stats = SearchStats(**_known(SearchStats, data["stats"]))
        tree = TreeNode.from_dict(data["tree"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return SearchResult(suggestions, tree, stats, context_ids=()), params


def _unshowable(search: object, what: str) -> str | None:
    """Why a saved or imported search is not shown, when it holds NaN or an infinity."""
    broken = non_finite(search, "search")
    if broken is None:
        return None
    return f"{what} are not shown: {broken} is not a finite number. The story is searched again."


def _suggestion(data: dict) -> Suggestion:
    values = _known(Suggestion, data)
    for name in ("token_ids", "token_pieces", "token_logprobs"):
        values[name] = tuple(values[name])
    return Suggestion(**values)


def _known(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


# -- a whole session as JSON --------------------------------------------------------------
def export_session(ws: Workspace) -> str:
    """The story's history, settings and last search (tree with probabilities) as JSON."""
    last = ws.last_result()
    search = None
    if last is not None:
        params = next(p for (_, p), r in ws.results.items() if r is last)
        search = search_to_dict(last, params)
    return json.dumps(
        {
            "format": SESSION_FORMAT,
            "version": 1,
            "title": ws.title,
            "history": [{"text": c.text, "kind": c.kind} for c in ws.history],
            "position": ws.position,
            "settings": ws.settings,
            "search": search,
        },
        ensure_ascii=False,
        indent=1,
        allow_nan=False,
    )


def import_session(book: Book, data: bytes | str) -> str:
    """A new story in `book` from `export_session`'s JSON; returns its id.

    Raises ValueError, saying what is wrong, for anything that is not such a session.
    """
    try:
        session = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a JSON file ({e})") from e
    if not isinstance(session, dict) or session.get("format") != SESSION_FORMAT:
        raise ValueError(f'not a LLooM session (no "format": "{SESSION_FORMAT}")')
    history = session.get("history")
    if not isinstance(history, list) or not history:
        raise ValueError("the session has no history")
    texts = [clean_text(str(h.get("text", ""))) if isinstance(h, dict) else None for h in history]
    if None in texts:
        raise ValueError("a history entry is not an object with a text")
    position = session.get("position", len(texts) - 1)
    if not isinstance(position, int) or not 0 <= position < len(texts):
        position = len(texts) - 1
    title = clean_text(str(session.get("title") or "")) or None
    story_id = book.create(texts[0], kind="import", title=title)
    for text in texts[1:]:
        book.record(story_id, text, "import")
    book.move(story_id, position)
    if isinstance(session.get("settings"), dict) and non_finite(session["settings"]) is None:
        book.save_settings(story_id, session["settings"])
    if isinstance(session.get("search"), dict) and search_from_dict(session["search"]):
        book.save_search(story_id, session["search"])
    return story_id
