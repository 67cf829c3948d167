"""A deadline for a whole blocking call, where HTTP clients only time out each read.

`requests` and `httpx` apply their timeout to every socket read, so a server that drips
its reply a byte at a time never trips it. `within(seconds, call)` runs `call` on a
daemon thread and waits at most `seconds` for it to finish; past that it raises
`TooSlow`. The abandoned call goes on until its own per-read timeout or the server's
end, on a daemon thread, so it never holds a process at exit; its result is dropped
(readers of a reply stop at their own deadline too, and free what they read: see
`backends.http`).

Any number of seconds may come in (a setting of 1e12): `bounded` makes it one the clocks
and waits below can take, LONGEST at most (a month: longer is "never" to a writer).

Owns: the waiting. Not: the wording of the error (each client says which server).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

LONGEST = 30 * 24 * 3600.0  # seconds; threading's and sockets' waits overflow near 1e10


def bounded(seconds: float) -> float:
    """`seconds` capped at LONGEST (+inf included); ValueError unless it is above 0."""
    if not seconds > 0:  # NaN too
        raise ValueError(f"a timeout must be a number of seconds above 0, not {seconds!r}")
    return min(float(seconds), LONGEST)


class TooSlow(Exception):
    """The call did not finish within its deadline."""


def within(seconds: float, call: Callable[[], T]) -> T:
    """`call()`'s result or exception, or TooSlow once `seconds` have passed."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as e:  # handed to the waiting caller, raised there
            outcome["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="lloom-deadline", daemon=True).start()
    if not done.wait(min(seconds, LONGEST)):
        raise TooSlow(f"no complete answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
