"""One tab's cancellable background job: look-ahead's searches, a long story's reading.

A `Job` runs at most one piece of work wanted at a time, on a daemon thread of its own.
Each `start` makes a new run and leaves the one before unwanted; `cancel` leaves the
run in progress unwanted. A run learns it is no longer wanted by asking its `Wanted`
(cheap and thread-safe: a backend may ask it on its own worker thread) and stops at its
next step (a depth, a chunk); what it finished stays with its owner. `lock` guards the
run's generation and what the owner keeps beside it (its plans, its progress).

Knows nothing of searches or backends: `weave.desk.lookahead` and `weave.desk.reading`
run on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from backends.base import always


@dataclass(frozen=True, eq=False)
class Wanted:
    """Whether run `generation` of `job` is still wanted: the latest started, not
    cancelled, and its tab still `alive()`."""

    job: Job
    generation: int
    alive: Callable[[], bool] = always

    def __call__(self) -> bool:
        return self.job.generation == self.generation and self.alive()

    def latest(self) -> bool:
        """Whether this is still the job's latest run (its tab alive or not): what it
        reports is the job's to keep."""
        return self.job.generation == self.generation


class Job:
    """At most one wanted run at a time, each on a daemon thread named `name`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.RLock()  # the owner holds it around `start` and `cancel` too
        self.generation = 0  # a run is wanted while it is the latest one started
        self._thread: threading.Thread | None = None

    def start(self, work: Callable[[Wanted], None], alive: Callable[[], bool] = always) -> int:
        """Run `work(wanted)` on a thread of its own, the run before it left unwanted;
        its generation."""
        with self.lock:
            self.generation += 1
            wanted = Wanted(self, self.generation, alive)
            self._thread = threading.Thread(
                target=work, args=(wanted,), name=self.name, daemon=True
            )
            self._thread.start()
            return wanted.generation

    def cancel(self) -> None:
        """Leave the run in progress unwanted: it stops at its next step."""
        with self.lock:
            self.generation += 1

    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()
