"""Four writers at once on one shared real model: nobody's story gets another's suggestions.

Each thread runs what a page session runs (`Workspace.start` in one shared story store,
then `Offers.suggest` on the process's one backend); every story's suggestions must
equal what a lone run of that story gives. The store is each of the two databases in
turn (`stories_at`: SQLite, PostgreSQL).
"""

from __future__ import annotations

import threading

import pytest

from weave.desk.session import Workspace
from weave.loom.store import LoomStore
from weave.search.params import SearchParams

pytestmark = pytest.mark.slow
STORIES = [
    "Once upon a time,",
    "The forest seemed darker then usual, but that did not bother Elis in the least.",
    "In the age before man,",
    "The spaceship landed quietly on the red dunes, and the captain",
]
PARAMS = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=10)


def run(store: LoomStore, backend, story: str):
    ws = Workspace(store)
    assert ws.start(story), ws.save_error
    offer = ws.offers.suggest(backend, ws.spot, PARAMS)
    assert offer is not None, ws.offers.error
    return ws, offer.result


def test_four_sessions_at_once_each_get_their_own_suggestions(
    fresh_mlx_backend, embedded_model_path, stories_at
):
    store = LoomStore(stories_at)
    alone = {story: run(store, fresh_mlx_backend, story)[1] for story in STORIES}
    fresh_mlx_backend.close()
    from backends.mlx.backend import MLXBackend

    shared = MLXBackend(embedded_model_path, display_name="SmolLM2-135M-Instruct")  # cold

    barrier = threading.Barrier(len(STORIES))
    outcomes: dict[str, object] = {}

    def writer(story: str) -> None:
        barrier.wait()
        try:
            outcomes[story] = run(store, shared, story)
        except BaseException as e:  # reported below, in the test's thread
            outcomes[story] = e

    threads = [threading.Thread(target=writer, args=(story,)) for story in STORIES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    shared.close()
    for story in STORIES:
        outcome = outcomes[story]
        assert not isinstance(outcome, BaseException), f"{story!r}: {outcome!r}"
        ws, result = outcome
        assert ws.text == story  # no session's story changed
        expected = alone[story]
        assert result.context_ids == expected.context_ids
        assert [s.text for s in result.suggestions] == [s.text for s in expected.suggestions]
        for got, want in zip(result.suggestions, expected.suggestions, strict=True):
            assert got.token_ids == want.token_ids
            assert got.logprob == pytest.approx(want.logprob, abs=1e-3)
        assert result.stats.model_tokens > 0  # each session counted its own work
    assert len({tuple(s.text for s in outcomes[t][1].suggestions) for t in STORIES}) == 4
