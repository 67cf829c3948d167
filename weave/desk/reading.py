"""A long story read in the background, so that the page goes on while the model reads it.

Where a search would first have to read many of the story's tokens (more than the backend
reads without a wait worth showing: `Backend.unread`), a tab's `Reading` reads them on a
thread of its own (`Backend.read_ahead`, the writer's own work, not look-ahead's) and
says how far it has got (`ReadState`). The page shows that, lets the writer edit and
move meanwhile, and searches once the story is read: the search then finds it in the
backend's cache. A move stops the reading between chunks (`cancel`); what was read stays
cached, so reading the same story again goes on from there. A failed read says why once
(`wait_for`), then is forgotten, so that asking again reads again.

Knows nothing of pages, nodes or stores: `weave.desk.offers.Offers` asks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from backends.base import Backend, Cancelled
from backends.errors import BackendError
from weave.desk.background import Job, Wanted
from weave.search.asking import MOST_ASKED


@dataclass(frozen=True)
class ReadState:
    """How far a background read has got: `read` of `total` tokens; `error`, why it
    failed (then it has ended)."""

    read: int
    total: int
    error: str | None = None


class Reading:
    """One tab's background read: at most one running, for one (model, context ids)."""

    def __init__(self) -> None:
        self._job = Job("lloom-reading")  # its lock guards the fields below too
        self._key: tuple[str, tuple[int, ...]] | None = None
        self._state: ReadState | None = None

    def wait_for(
        self, backend: Backend, ids: Sequence[int], *, alive: Callable[[], bool]
    ) -> ReadState | None:
        """What a search for `ids` waits for: None when nothing (they are read, or few
        enough for the search to read), else the reading's state, the reading started here
        when none runs for them. A failed read's state is answered once, then forgotten.
        `alive()` False (the tab is gone) stops the reading too; it must be cheap and
        thread-safe. Raises the backend's `BackendError` (asking what is cached)."""
        key = (backend.model_name, tuple(ids))
        with self._job.lock:
            if key == self._key:
                if self.running():
                    return self._state
                state = self._state
                if state is None or state.error is None:
                    return None  # read
                self._key = self._state = None  # its error is said now, and only now
                return state
        left = backend.unread(list(ids))
        if not left:
            return None
        with self._job.lock:
            self._key, self._state = key, ReadState(len(ids) - left, len(ids))
            self._job.start(partial(self._read, backend, key[1]), alive)
            return self._state

    def running(self) -> bool:
        return self._job.running()

    def state(self) -> ReadState | None:
        """The latest read's state (None: none, or it was forgotten)."""
        return self._state

    def cancel(self) -> None:
        """Stop the reading at its next chunk (the writer moved); what it read stays cached."""
        with self._job.lock:
            self._job.cancel()
            if self.running():
                self._key = self._state = None

    def _read(self, backend: Backend, ids: tuple[int, ...], wanted: Wanted) -> None:
        def report(read: int, total: int) -> None:
            self._update(wanted, ReadState(read, total))

        try:
            with backend.cancellable(wanted):
                backend.read_ahead(list(ids), MOST_ASKED, report)
        except Cancelled:
            return
        except BackendError as e:
            self._update(wanted, ReadState(0, len(ids), error=str(e)))
            return
        self._update(wanted, ReadState(len(ids), len(ids)))

    def _update(self, run: Wanted, state: ReadState) -> None:
        with self._job.lock:
            if run.latest():
                self._state = state
