"""Waiting for the engine's background work (look-ahead, a story's reading) to end, through
what the page itself asks of it: `running()`."""

from __future__ import annotations

import time
from typing import Protocol

POLL_S = 0.002  # short beside any run measured: a benchmark's seconds stay the run's own


class Background(Protocol):
    def running(self) -> bool: ...


def ended(job: Background, timeout: float = 300.0) -> None:
    """Return once `job` runs nothing; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while job.running():
        assert time.monotonic() < deadline, f"{type(job).__name__} still running after {timeout} s"
        time.sleep(POLL_S)
