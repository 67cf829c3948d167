"""The MLX backend's thread, and what each calling thread asked of it.

`MLXWorker` is the one thread that runs every MLX job, in order, so that MLX arrays stay
on the thread (and stream) that made them. `Callers` holds, per calling thread, the
`wanted()` check of a `cancellable` block and whether the thread's searches are
look-ahead's (`background`): the backend reads them when it queues a request
(`backends.mlx.batching`) or reads a story chunk by chunk.

Owns the thread and the per-thread promises; the jobs it runs are the backend's.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager

import mlx.core as mx

from backends.base import ThreadWanted
from backends.errors import BackendError


def _stopped() -> BackendError:
    """What a job gets once the backend is closed (a look-ahead thread may still ask)."""
    return BackendError("the model was closed: its worker has stopped", backend="mlx")


class MLXWorker:
    """One thread that runs every MLX job, in order.

    It ends when asked or once the main thread has finished, and clears its MLX streams
    on the way out: MLX aborts the process at exit when a thread's streams outlive it.
    """

    POLL_SECONDS = 0.2

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        # Not a daemon, even when made from one (Streamlit's script threads are): shutdown
        # waits for it, and it clears its streams once the main thread has finished.
        self._thread = threading.Thread(target=self._run, name="lloom-mlx", daemon=False)
        self._thread.start()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        if self._stopping.is_set():
            future.set_exception(_stopped())
        else:
            self._jobs.put((future, fn, args))
        return future

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def stop(self) -> None:
        self._stopping.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.is_set() and threading.main_thread().is_alive():
            try:
                future, fn, args = self._jobs.get(timeout=self.POLL_SECONDS)
            except queue.Empty:
                continue
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as e:  # handed to the caller's thread
                    future.set_exception(e)
        self._stopping.set()
        while not self._jobs.empty():
            self._jobs.get_nowait()[0].set_exception(_stopped())
        mx.clear_streams()


class Callers(ThreadWanted):
    """Each calling thread's `wanted()` check and whether its searches are look-ahead's."""

    @property
    def background(self) -> bool:
        return getattr(self._local, "background", False)

    @contextmanager
    def in_background(self, wanted: Callable[[], bool]) -> Iterator[None]:
        with self.cancellable(wanted):
            self._local.background = True
            try:
                yield
            finally:
                self._local.background = False
