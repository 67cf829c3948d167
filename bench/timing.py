"""Wall times of whole searches, client against client, taken in turn on one server.

The remote benches time each client's search on each story `repeats` times, the
clients interleaved so that a change in the machine's load falls on all of them alike,
and compare medians. Each search gets a fresh client: none starts with the last one's
caches.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from backends.base import Backend
from weave.search.beams import expand
from weave.search.params import SearchParams


def median_search_seconds(
    clients: dict[str, Callable[[str], Backend]],
    url: str,
    story: str,
    params: SearchParams,
    repeats: int,
) -> dict[str, float]:
    """{client name: median seconds of one search of `story`} against the server at `url`."""
    seconds: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(repeats):
        for name, make in clients.items():
            backend = make(url)
            started = time.perf_counter()
            expand(backend, backend.tokenize(story), params)
            seconds[name].append(time.perf_counter() - started)
    return {name: statistics.median(times) for name, times in seconds.items()}
