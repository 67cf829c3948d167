"""The batcher's queueing on the MLX worker thread: joined requests, and no wait alone.

`run` here stands for the backend's forward: it records what each call was given, so
the tests see which requests were joined (the forwards themselves are tested against the
real model in test_mlx_backend.py)."""

from __future__ import annotations

import threading

from backends.mlx.batching import Batcher, Forward
from backends.mlx.worker import MLXWorker

HOUR = 3600.0


class Recorder:
    def __init__(self):
        self.calls: list[tuple[set, int]] = []

    def __call__(self, contexts, k, asked, background=False):
        self.calls.append((set(contexts), k))
        answers = {c: [f"{c}:{i}" for i in range(k)] for c in contexts}
        return answers, [Forward(tuple(sorted(contexts)), 1, prefill=False)]


def test_a_session_alone_never_waits_for_the_window():
    worker, run = MLXWorker(), Recorder()
    batcher = Batcher(worker.submit, run, window=HOUR)  # a wait would take an hour
    try:
        for depth in range(3):
            answers, usage = batcher.ask({(1, depth)}, 2).result(timeout=30)
            assert answers == {(1, depth): [f"{(1, depth)}:0", f"{(1, depth)}:1"]}
            assert usage.forward_calls == 1 and usage.model_tokens == 1
        assert len(run.calls) == 3
    finally:
        worker.stop()


def test_requests_pending_together_run_as_one_call_and_each_gets_its_own():
    worker, run = MLXWorker(), Recorder()
    batcher = Batcher(worker.submit, run, window=0.0)
    busy = threading.Event()
    worker.submit(busy.wait)  # the worker is busy while three sessions ask
    futures = {}

    def ask(name, contexts, k):
        futures[name] = batcher.ask(contexts, k)

    asks = [
        threading.Thread(target=ask, args=("a", {(1,), (1, 2)}, 3)),
        threading.Thread(target=ask, args=("b", {(1,)}, 1)),
        threading.Thread(target=ask, args=("c", {(7, 8)}, 2)),
    ]
    try:
        for t in asks:
            t.start()
        for t in asks:
            t.join()
        busy.set()
        got = {name: f.result(timeout=30) for name, f in futures.items()}
        assert run.calls == [({(1,), (1, 2), (7, 8)}, 3)]
        assert got["b"][0] == {(1,): ["(1,):0"]}
        assert got["c"][0] == {(7, 8): ["(7, 8):0", "(7, 8):1"]}
        assert got["a"][1].model_tokens == 2 and got["c"][1].model_tokens == 1
    finally:
        busy.set()
        worker.stop()
