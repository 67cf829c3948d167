"""Look-ahead on the real embedded model (MLX): its results are the searches made after
accepting, a writer's request that arrives while it runs starts within one depth, and
the KV cap holds with it running, look-ahead's fragments dropped first."""

from __future__ import annotations

import threading
import time
from contextlib import suppress

import pytest

from backends.base import Cancelled
from backends.mlx.backend import MLXBackend
from tests.background import ended
from weave.desk.lookahead import LookAhead
from weave.search.beams import expand
from weave.search.params import SearchParams

STORY = "The forest seemed darker then usual, but that did not bother Elis in the least."
OTHER = "Once upon a time,"
PARAMS = SearchParams(cutoff=0.1, max_depth=8, max_suggestions=16)
MODEL = "SmolLM2-135M-Instruct"


def backend_for(path, **kw) -> MLXBackend:
    return MLXBackend(path, display_name=MODEL, **kw)


def test_look_ahead_equals_the_searches_made_after_accepting(embedded_model_path):
    ahead_backend, after_backend = (
        backend_for(embedded_model_path),
        backend_for(embedded_model_path),
    )
    try:
        ids = ahead_backend.tokenize(STORY)
        shown = expand(ahead_backend, ids, PARAMS)
        assert expand(after_backend, ids, PARAMS).suggestions == shown.suggestions
        ahead = LookAhead(3)
        ahead.start(ahead_backend, ids, shown.suggestions, PARAMS)
        ended(ahead, timeout=300)
        exact = [s for s in shown.suggestions if s.exact][:3]
        assert len(exact) == 3
        for s in exact:  # the writer's searches, in the same order, on a backend like it
            accepted = ids + list(s.token_ids)
            after = expand(after_backend, accepted, PARAMS)
            found = ahead.take(MODEL, accepted, PARAMS)
            assert found is not None, s.text
            assert found.suggestions == after.suggestions
            assert found.tree.to_dict() == after.tree.to_dict()
    finally:
        ahead_backend.close()
        after_backend.close()


def test_a_writer_arriving_during_look_ahead_starts_within_one_depth(embedded_model_path):
    backend = backend_for(embedded_model_path)
    try:
        story, other = backend.tokenize(STORY), backend.tokenize(OTHER)
        shown = expand(backend, story, PARAMS)
        expand(backend, other, SearchParams(max_depth=1))  # B's story read: B asks depths
        depths: list[float] = []  # when each of look-ahead's depths came back
        stop = threading.Event()

        def look_ahead():
            with backend.background(lambda: not stop.is_set()), suppress(Cancelled):
                for s in shown.suggestions[:3]:
                    expand(backend, story + list(s.token_ids), PARAMS,
                           progress=lambda p: depths.append(time.perf_counter()))  # fmt: skip

        thread = threading.Thread(target=look_ahead)
        thread.start()
        deadline = time.monotonic() + 120
        while len(depths) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(depths) >= 2, "look-ahead made no progress"
        asked = time.perf_counter()
        first: list[float] = []
        expand(backend, other, PARAMS, progress=lambda p: first.append(time.perf_counter()))
        during_first = [t for t in depths if asked < t <= first[1]]
        during_all = [t for t in depths if asked < t <= first[-1]]
        assert thread.is_alive(), "look-ahead ended before the writer finished: nothing tested"
        stop.set()
        thread.join(timeout=120)
        # first[0] is the depth-0 report (reading), first[1] the writer's first depth
        assert len(during_first) <= 1, during_first
        assert len(during_all) <= 1 + len(first) // 2, (during_all, len(first))
    finally:
        backend.close()


def test_the_kv_cap_holds_with_look_ahead_running_and_its_fragments_go_first(
    embedded_model_path,
):
    probe = backend_for(embedded_model_path)
    try:
        ids = probe.tokenize(STORY)
        shown = expand(probe, ids, PARAMS)
        writers_bytes = probe.cache_bytes  # what the writer's search reached
    finally:
        probe.close()
    cap = int(writers_bytes * 1.3)  # room for the writer's, not for 3 more searches
    backend = backend_for(embedded_model_path, kv_cache_bytes=cap)
    try:
        assert expand(backend, ids, PARAMS).suggestions == shown.suggestions
        ahead = LookAhead(3)
        ahead.start(backend, ids, shown.suggestions, PARAMS)
        ended(ahead, timeout=300)
        assert all(
            ahead.ready(MODEL, ids + list(s.token_ids), PARAMS) for s in shown.suggestions[:3]
        )
        assert backend.cache_bytes <= cap
        # the writer's own search is still whole in the cache: it costs no forward
        again = expand(backend, ids, PARAMS)
        assert again.stats.forward_calls == 0, again.stats
        assert again.suggestions == shown.suggestions
    finally:
        backend.close()


@pytest.fixture(autouse=True)
def _quiet_threads():
    """Each test leaves no look-ahead thread behind."""
    yield
    assert not [t for t in threading.enumerate() if t.name == "lloom-lookahead"]
