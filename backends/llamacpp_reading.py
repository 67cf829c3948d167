"""A long prompt read by llama-server ahead of a search, its progress streamed.

llama-server evaluates a prompt in batches (`-ub`), and with `return_progress` a stream
reports each batch as it ends (`prompt_progress`: `total`, `cache`, `processed`). `read`
sends one such request (the caller shapes it: slot, prompt, one greedy token) and hands
the progress on to `report(read, total)` as it arrives; a caller's `cancellable` block
that no longer wants it drops the connection, which stops the server too. A server too
old to report progress reads all the same, silently.

Owns: the stream of one read and its progress. Not: which slot, what the slot then holds
(`backends.llamacpp`, `backends.llamacpp_slots`).
"""

from __future__ import annotations

from collections.abc import Callable

from backends.base import Cancelled
from backends.http import JsonClient

PATH = "/completion"


def read(
    client: JsonClient, body: dict, report: Callable[[int, int], None], wanted: Callable[[], bool]
) -> dict | None:
    """Stream `body` (a `/completion` request) with its progress; report(read, total)
    after each batch the server ends; the last event (the one with the slot's `timings`),
    or None where the server sent none. Raises `Cancelled` once `wanted()` is False."""
    events = client.open_events(PATH, {**body, "stream": True, "return_progress": True})
    last = None
    try:
        while (event := events.next()) is not None:
            if not wanted():
                raise Cancelled("reading stopped: no longer wanted")
            progress = event.get("prompt_progress") if isinstance(event, dict) else None
            done = _progress(progress)
            if done is not None:
                report(*done)
            last = event if isinstance(event, dict) else last
    finally:
        events.close()
    return last


def _progress(progress: object) -> tuple[int, int] | None:
    """(tokens read, of total) from a `prompt_progress` object; None where it is not one."""
    if not isinstance(progress, dict):
        return None
    total, cache, processed = (progress.get(key) for key in ("total", "cache", "processed"))
    if not all(type(n) is int and n >= 0 for n in (total, cache, processed)):
        return None
    return min(cache + processed, total), total
