"""Look-ahead: the searches a writer is likely to ask for next, made while they read.

Once a node's suggestions are shown, `LookAhead.start` searches from its top `rows`
exact suggestions (those whose token ids spell their text) as if each were accepted:
the context is the node's ids followed by the suggestion's (a healed suggestion's ids in
place of the story's last ids it replaces, `Suggestion.after`), the ids the accepted
node's path will have, with the same parameters, so the result is the search the writer
would get after accepting it (`weave.search.beams` is a function of the backend's answers).
Under the story's bans (`weave.story.bans`) each search is guarded as the writer's
would be: by a guard reading the story's text with the suggestion taken (`Ahead.text`).
A search that finds one lone suggestion, which the page will take by itself
(`weave.search.rows.lone`), is followed by the search after it, `LONE_FOLLOWS` deep: the
writer who accepts the row is shown what follows the lone one.
A suggestion after which the search would not fit the backend's read window (the model's
window, or less where reading is slow: `Backend.read_window`) is left out: the
accepted node's context is then cut (`weave.story.context.build_context`), to ids
look-ahead cannot know.
It runs on a thread of its own, one suggestion after another, as the backend's
background work (`Backend.background`: on MLX writers' requests are served first and
the work is dropped once no longer wanted), and it stops between depths once the writer
acts (`cancel`, or a new `start`). While the page redraws (`hold`) it waits between
depths: on a machine of two cores its forwards would take the CPU from the browser. Each
finished search is kept under (model, context ids, parameters, bans), the key a search
after the accept has, where `weave.desk.offers.Offers` finds it (`take`); an edited
suggestion's node has other ids, so it searches normally.

This module knows nothing of pages, stores or node ids, and shows nothing: the tab's
offer cache (`Offers`) is the one place a writer's suggestions come from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from backends.base import Backend, Cancelled, always
from backends.errors import BackendError
from weave.desk.background import Job, Wanted
from weave.lru import LRU
from weave.search.beams import Progress, SearchResult, expand
from weave.search.params import SearchParams
from weave.search.rows import lone
from weave.search.tree import Suggestion
from weave.story.bans import Bans
from weave.story.guard import Guard

KEPT = 32  # finished searches kept per tab (a few nodes' worth of rows)
LONE_FOLLOWS = 3  # lone suggestions followed after a planned search (the page takes more)
PAUSE_S = 0.05  # how often a run waiting (to begin, or out a hold) checks it is still wanted
NO_BANS = Bans()


@dataclass(frozen=True)
class Ahead:
    """What a search is made from: the key of a look-ahead result and of the search it
    stands for."""

    model: str
    context: tuple[int, ...]
    params: SearchParams
    bans: Bans = NO_BANS  # the story's bans, which guard the search
    # The story's text the search continues (the guard reads it); not part of the key:
    # the context's ids end with the same text.
    text: str = field(default="", compare=False, repr=False)

    def guard(self) -> Guard | None:
        """The guard of the search (None: no bans), as `weave.desk.spot.Spot.guard`'s."""
        return Guard(self.bans, self.text) if self.bans.active else None


class _Dropped(Exception):
    """The writer acted: the search in progress is no longer wanted."""


class LookAhead:
    """One tab's look-ahead: at most one run at a time, its finished searches kept.

    `start`, `cancel`, `take` and `ready` are called from the page's thread; the run is
    on a thread of its own. A search in progress is never shown: only finished ones are.
    """

    def __init__(self, rows: int, *, kept: int = KEPT) -> None:
        self.rows = rows
        self._done: LRU[Ahead, SearchResult] = LRU(kept)
        self._job = Job("lloom-lookahead")  # its lock guards the fields below too
        self._planned: tuple[int, set[Ahead]] = (0, set())  # the latest run: its generation, plans
        self._resume_at = 0.0  # no forward begins before this (time.monotonic())

    # -- the page's side --------------------------------------------------------------
    def start(
        self,
        backend: Backend,
        context: Sequence[int],
        suggestions: Sequence[Suggestion],
        params: SearchParams,
        *,
        alive: Callable[[], bool] = always,
        after: float = 0.0,
        bans: Bans = NO_BANS,
        text: str = "",
    ) -> None:
        """Search from the first `rows` exact suggestions after `context`, in their order,
        on a thread, the first request `after` seconds from now (a page finishes drawing
        the suggestions before the model takes the CPU); whatever ran before stops at its
        next depth, unless it runs for these very searches (then it goes on). `alive()`
        False (the tab is gone) stops it too; it must be cheap and thread-safe: a backend
        may call it on its own worker thread. Under `bans`, each search is guarded as if
        the story, now ending in `text`, ended in `text` and the suggestion."""
        plans = self.plans(
            backend.model_name, context, suggestions, params,
            window=backend.read_window, bans=bans, text=text,
        )  # fmt: skip
        self.hold(after)
        with self._job.lock:
            plans = [plan for plan in plans if plan not in self._done]
            going = self.running() and self._planned[0] == self._job.generation
            if going and set(plans) <= self._planned[1]:
                return  # asked again for what runs now (a page rerun): let it go on
            if not plans:
                self._job.cancel()
                self._planned = (self._job.generation, set())
                return
            generation = self._job.start(partial(self._run, backend, plans), alive)
            self._planned = (generation, set(plans))

    def plans(
        self,
        model: str,
        context: Sequence[int],
        suggestions: Sequence[Suggestion],
        params: SearchParams,
        *,
        window: int | None = None,
        bans: Bans = NO_BANS,
        text: str = "",
    ) -> list[Ahead]:
        """The searches `start` makes: after each of the first `rows` exact suggestions,
        but those after which the search would not fit the backend's `window` (its read
        window; None: no limit), under `bans` after `text` and the suggestion's."""
        exact = [s for s in suggestions if s.exact and s.token_ids][: self.rows]
        plans = [Ahead(model, s.after(tuple(context)), params, bans, text + s.text) for s in exact]
        if window is None:
            return plans
        return [plan for plan in plans if len(plan.context) + params.max_depth <= window]

    def hold(self, seconds: float) -> None:
        """Begin no forward for `seconds` from now (a run in progress waits at its next
        depth, then goes on): the page is drawing."""
        with self._job.lock:
            self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    def cancel(self) -> None:
        """Stop the run in progress at its next depth (finished searches stay)."""
        self._job.cancel()

    def take(
        self, model: str, context: Sequence[int], params: SearchParams, bans: Bans = NO_BANS
    ) -> SearchResult | None:
        """The finished search after `context` with `params` by `model` under `bans`, if
        look-ahead made it."""
        key = Ahead(model, tuple(context), params, bans)
        with self._job.lock:
            return self._done.get(key)

    def ready(
        self, model: str, context: Sequence[int], params: SearchParams, bans: Bans = NO_BANS
    ) -> bool:
        return self.take(model, context, params, bans) is not None

    def running(self) -> bool:
        return self._job.running()

    # -- the run ----------------------------------------------------------------------
    def _run(self, backend: Backend, plans: list[Ahead], wanted: Wanted) -> None:
        def between_depths(_: Progress) -> None:
            if not self._held(wanted):
                raise _Dropped

        if not self._held(wanted):
            return
        try:
            with backend.background(wanted):
                for plan in plans:
                    for _ in range(1 + LONE_FOLLOWS):
                        if not self._held(wanted):
                            return
                        made = self.take(plan.model, plan.context, plan.params, plan.bans)
                        result = made or expand(
                            backend, list(plan.context), plan.params,
                            progress=between_depths, guard=plan.guard(),
                        )  # fmt: skip
                        self._keep(plan, result)
                        plan = self._after_lone(plan, result, backend.read_window)
                        if plan is None:
                            break
        except (_Dropped, Cancelled, BackendError, ValueError):
            # Dropped or failed: nothing is kept, and a writer who accepts one of these
            # suggestions searches as usual (and sees the backend's error, if it stays).
            return

    @staticmethod
    def _after_lone(plan: Ahead, result: SearchResult, window: int | None) -> Ahead | None:
        """The search after `result`'s lone suggestion, which the page takes by itself
        (None: there is none, or the search would not fit `window`)."""
        only = lone(result.suggestions)
        if only is None or not only.exact or not only.token_ids:
            return None
        context = only.after(plan.context)
        if window is not None and len(context) + plan.params.max_depth > window:
            return None
        return Ahead(plan.model, context, plan.params, plan.bans, plan.text + only.text)

    def _held(self, wanted: Callable[[], bool]) -> bool:
        """Wait out a hold; whether the run is still wanted."""
        while (left := self._resume_at - time.monotonic()) > 0:
            if not wanted():
                return False
            time.sleep(min(PAUSE_S, left))
        return wanted()

    def _keep(self, plan: Ahead, result: SearchResult) -> None:
        with self._job.lock:
            self._done.put(plan, result)
