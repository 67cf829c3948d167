"""Each row's top-k and log-probabilities from its logits, against a float64 brute force."""

from __future__ import annotations

import numpy as np
import pytest

from backends.mlx.ranking import ranked


def brute_force(logits: np.ndarray, k: int):
    """Sorted by log-probability, ties to the lower id; log-softmax in float64."""
    wide = logits.astype(np.float64)
    logprobs = wide - np.log(np.exp(wide - wide.max(-1, keepdims=True)).sum(-1, keepdims=True))
    logprobs -= wide.max(-1, keepdims=True)
    ids = np.stack([np.lexsort((np.arange(row.size), -row))[:k] for row in wide])
    return ids, np.take_along_axis(logprobs, ids, -1), logprobs


@pytest.mark.parametrize(
    ("rows", "vocab", "k"),
    [(1, 49152, 5), (7, 49152, 20), (3, 1000, 3), (2, 50, 5), (4, 640, 80), (2, 6, 9)],
)
def test_top_k_and_logprobs_equal_a_brute_force(rows, vocab, k):
    """Vocabularies that split into the blocks evenly and not, fewer tokens than blocks,
    k above the block count and above the vocabulary."""
    logits = (np.random.default_rng(vocab + k).normal(size=(rows, vocab)) * 4).astype(np.float32)
    ids, logprobs, every = brute_force(logits, k)
    got_ids, got_logprobs, _ = ranked(logits.copy(), k)
    assert (got_ids == ids).all()
    assert np.abs(got_logprobs - logprobs).max() <= 1e-5


def test_ties_go_to_the_lower_id_and_masked_tokens_stay_out():
    logits = np.full((2, 4096), -np.inf, np.float32)
    logits[0, [3000, 7, 900, 12]] = [2.0, 2.0, 2.0, 1.0]
    logits[1, 4000:] = 0.5  # 96 equal logits, the rest ruled out
    ids, logprobs, _ = ranked(logits.copy(), 3)
    assert ids.tolist() == [[7, 900, 3000], [4000, 4001, 4002]]
    assert np.allclose(logprobs[1], -np.log(96))


def test_one_chosen_token_per_row_comes_with_its_logprob():
    logits = np.random.default_rng(1).normal(size=(5, 3000)).astype(np.float32)
    chosen = np.array([0, 17, 2999, 5, 5])
    _, _, every = brute_force(logits, 1)
    _, _, also = ranked(logits.copy(), 1, also=chosen)
    assert np.abs(also - every[np.arange(5), chosen]).max() <= 1e-5


def test_several_asked_tokens_per_row_come_with_their_logprobs():
    logits = np.random.default_rng(2).normal(size=(3, 49152)).astype(np.float32)
    asked = np.array([[0, 17, 49151], [5, 5, 300], [40000, 1, 2]])
    _, _, every = brute_force(logits, 1)
    _, _, also = ranked(logits.copy(), 4, also=asked)
    assert also.shape == asked.shape
    assert np.abs(also - np.take_along_axis(every, asked, -1)).max() <= 1e-5


def test_logits_that_are_not_numbers_are_an_error():
    logits = np.zeros((2, 300), np.float32)
    logits[1, 7] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        ranked(logits, 3)
