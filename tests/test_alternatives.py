"""Alternatives at any token of the story (`Backend.alternatives`) on the real embedded
model: every position against a plain forward of the whole story, and the cached story's
KV reused so that a window at the end costs only its own tokens."""

from __future__ import annotations

import mlx.core as mx
import pytest

from backends import BackendError
from backends.mlx import MLXBackend
from weave.search import SearchParams, expand

STORY = "The forest seemed darker then usual, but that did not bother Elis in the least."
TOLERANCE = 1e-3


def plain_logprobs(backend: MLXBackend, ids: list[int]) -> mx.array:
    """(len(ids), vocab) log-probs from one uncached forward: row j predicts ids[j + 1]."""
    logits = backend.model(mx.array([ids]))[0].astype(mx.float32)
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def assert_matches(rows, reference: mx.array, ids: list[int], k: int) -> None:
    for row in rows:
        expected = reference[row.position - 1]
        order = mx.argsort(-expected)[:k].tolist()
        assert [c.token_id for c in row.top] == order, row.position
        for cand in row.top:
            assert abs(cand.logprob - expected[cand.token_id].item()) <= TOLERANCE
        assert row.token_id == ids[row.position]
        assert abs(row.logprob - expected[ids[row.position]].item()) <= TOLERANCE


@pytest.mark.slow
def test_every_position_matches_a_plain_forward(embedded_model_path):
    backend = MLXBackend(embedded_model_path, prefill_chunk=7)  # several chunks
    try:
        ids = backend.tokenize(STORY)
        rows = backend.alternatives(ids, 5)
        assert [row.position for row in rows] == list(range(1, len(ids)))
        assert_matches(rows, plain_logprobs(backend, ids), ids, 5)
        assert rows[0].top[0].text == backend.detokenize([rows[0].top[0].token_id])
        with pytest.raises(BackendError, match="positions"):
            backend.alternatives(ids, 5, start=0)
    finally:
        backend.close()


@pytest.mark.slow
def test_a_window_after_a_search_reads_only_its_own_tokens(fresh_mlx_backend):
    backend = fresh_mlx_backend
    ids = backend.tokenize(STORY)
    expand(backend, ids, SearchParams(max_depth=2, max_suggestions=5))  # the story is cached
    before = backend.stats.snapshot()
    rows = backend.alternatives(ids, 3, start=len(ids) - 4)
    spent = backend.stats.snapshot() - before
    assert [row.position for row in rows] == list(range(len(ids) - 4, len(ids)))
    assert spent.model_tokens == 4 and spent.forward_calls == 1
    assert_matches(rows, plain_logprobs(backend, ids), ids, 3)
