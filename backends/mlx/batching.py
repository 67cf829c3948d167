"""Requests from different page sessions served together: one forward for all of them.

Every session's search asks the MLX backend for a depth at a time. Served one after
another, four writers wait for four forwards per depth; joined, their rows (each story
with its own shared prefix, see `backends.mlx.attention`) run as one forward. `Batcher.ask`
queues a request and a job on the MLX worker; the job takes every request pending, and
waits up to `window` seconds only for sessions that were in the last batch and have not
asked again yet (a search between two depths): a session alone never waits.

Each request gets its own answers (the top k it asked for, and the log-probs of the ids
it asked to weigh beside them) and what was spent on its contexts; a request whose
caller no longer wants it (`wanted()` is False when its batch is taken) fails with
`Cancelled` instead of running.

Writers come first. A request may be background work (look-ahead, `weave.desk.lookahead`):
a batch holds writers' requests only, or background ones only, never both, so no
writer's forward carries look-ahead rows; background requests run only when no writer's
is pending and no writer's search is going on (`searching`: from a search's start to its
end, between its depths too, however long its own Python takes there). So a search that
starts while look-ahead runs waits for one forward at most, and one in progress none.

Owns the queue and the waiting; the forwards are the backend's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from backends.base import Cancelled, Candidate, Usage, always

Context = tuple[int, ...]


@dataclass(frozen=True)
class Forward:
    """One forward the backend ran: its contexts and the tokens it ran for each."""

    contexts: tuple[Context, ...]
    tokens: int
    prefill: bool


@dataclass(eq=False)
class Request:
    contexts: frozenset[Context]
    k: int
    asked: dict[Context, frozenset[int]]  # per context, ids to weigh beside its top k
    requester: int  # the asking thread: one search runs its depths on one thread
    wanted: Callable[[], bool] = always
    background: bool = False  # look-ahead's: served after every writer's
    future: Future = field(default_factory=Future)


def usage_of(forwards: list[Forward], contexts: frozenset[Context] | None = None) -> Usage:
    """What the forwards spent on `contexts` (on everything, for None)."""
    total = Usage()
    for forward in forwards:
        mine = sum(1 for c in forward.contexts if contexts is None or c in contexts)
        if mine:
            tokens = forward.tokens * mine
            total += Usage(1, tokens, tokens if forward.prefill else 0)
    return total


def _failed(request: Request, job: Future) -> None:
    """A request whose job failed fails with it (the worker stopped: the backend was
    closed), unless another job has served it already: else its caller waits forever."""
    error = job.exception()
    if error is not None:
        with suppress(InvalidStateError):
            request.future.set_exception(error)


class Batcher:
    """Joins pending requests into one `run(contexts, k, asked, background) -> (answers,
    forwards)` call on the worker thread (`submit` runs a job there); `asked` holds, per
    context, the ids every request asked to weigh, and the answers list them after the
    top k; `background` says the call is look-ahead's."""

    def __init__(self, submit: Callable, run: Callable, window: float):
        self._submit = submit
        self._run = run
        self.window = window
        self._pending: list[Request] = []
        self._arrived = threading.Condition()
        self._last_batch: set[int] = set()
        self._last_background = False
        self._searching: set[int] = set()  # threads whose writer's search is going on

    def ask(
        self,
        contexts: set[Context],
        k: int,
        wanted: Callable[[], bool] = always,
        *,
        asked: dict[Context, frozenset[int]] | None = None,
        background: bool = False,
    ) -> Future:
        """Queue a request; its future gives ({context: top k, then the ids `asked` names
        for it not among them}, Usage), or `Cancelled` if wanted() is False when its turn
        comes (called on the worker thread). A `background` request waits for every
        writer's."""
        request = Request(frozenset(contexts), k, asked or {}, threading.get_ident(), wanted,
                          background)  # fmt: skip
        with self._arrived:
            self._pending.append(request)
            self._arrived.notify_all()
        self._submit(self._serve).add_done_callback(lambda job: _failed(request, job))
        return request.future

    @contextmanager
    def searching(self) -> Iterator[None]:
        """Within this block, this thread runs a writer's search: background requests wait
        until it ends (and are served then), whatever its pace between depths."""
        me = threading.get_ident()
        with self._arrived:
            entered = me not in self._searching
            self._searching.add(me)
            self._arrived.notify_all()  # a background batch waiting its window goes back
        try:
            yield
        finally:
            if entered:
                with self._arrived:
                    self._searching.discard(me)
                    self._last_batch.discard(me)  # it has left: nobody waits for it
                    waiting = not self._searching and bool(self._pending)
                if waiting:  # look-ahead held back by this search: its turn now
                    self._submit(self._serve)

    def _serve(self) -> None:
        batch = []
        for request in self._take():  # empty: an earlier job served it with others
            if request.wanted():
                batch.append(request)
            else:
                request.future.set_exception(Cancelled("no longer wanted"))
        if not batch:
            return
        contexts = set().union(*(r.contexts for r in batch))
        asked: dict[Context, frozenset[int]] = {}
        for request in batch:
            for context, ids in request.asked.items():
                asked[context] = asked.get(context, frozenset()) | ids
        k = max(r.k for r in batch)
        try:
            answers, forwards = self._run(contexts, k, asked, batch[0].background)
        except BaseException as e:  # every caller in the batch gets the failure
            for request in batch:
                request.future.set_exception(e)
            return
        for request in batch:
            mine = {c: _mine(answers[c], request.k, request.asked.get(c)) for c in request.contexts}
            request.future.set_result((mine, usage_of(forwards, request.contexts)))

    def _take(self) -> list[Request]:
        """Every pending writer's request, else every pending background one, after
        waiting (at most `window`) for the sessions of the last batch that have not asked
        again: a writer's batch waits only for writers, a background one for anyone.
        Background requests stay pending while a writer's search goes on (`searching`
        serves them when it ends)."""
        with self._arrived:
            deadline = time.monotonic() + self.window
            while True:
                writers = [r for r in self._pending if not r.background]
                if not writers and (self._searching or not self._pending):
                    return []
                batch = writers or list(self._pending)
                waited = set() if writers and self._last_background else self._last_batch
                missing = waited - {r.requester for r in self._pending}
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    break
                self._arrived.wait(left)
            self._pending = [r for r in self._pending if r not in batch]
            self._last_batch = {r.requester for r in batch}
            self._last_background = not writers
            return batch


def _mine(found: list[Candidate], k: int, asked: frozenset[int] | None) -> list[Candidate]:
    """A request's part of a context's answer (the batch's top k, most likely first, then
    the ids any request asked for): its own top k, then the ids it asked for."""
    if not asked:
        return found[:k]
    return found[:k] + [c for c in found[k:] if c.token_id in asked]
