"""Breadth where the writer chooses, on the real embedded model: the default rule's rows
spread over the model's likely first words, say each thing once, and never offer
punctuation alone or half a character (bench/bench_authors.py measures it on real
authors' prose; these are passages of our own)."""

from __future__ import annotations

import pytest

from bench.panel import PASSAGES
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.search.rows import key, opening

FIRST_ROWS = 10


@pytest.mark.parametrize("genre", ["fairy tale", "noir", "romance", "western"])
def test_the_first_ten_rows_are_the_trees_different_openings(mlx_backend, genre):
    story = dict(PASSAGES)[genre]
    ids = mlx_backend.tokenize(story)
    wide = expand(mlx_backend, ids, SearchParams()).suggestions
    narrow = expand(mlx_backend, ids, SearchParams().under("v03")).suggestions
    first = {opening(s.text) for s in wide[:FIRST_ROWS]}
    every = {opening(s.text) for s in wide}
    assert len(wide) >= FIRST_ROWS
    assert len(first) == min(FIRST_ROWS, len(every))  # no opening waits behind a variation
    assert len(first) > len({opening(s.text) for s in narrow[:FIRST_ROWS]})
    # each is said once: no two rows differ only by whitespace or final punctuation
    assert len({key(s.text) for s in wide}) == len(wide)


def test_a_comma_after_the_last_word_goes_on_to_a_word(mlx_backend):
    """'…recurring to her' once gave one suggestion, ',', taken by itself on the page."""
    story = "She walked back to the house with every thought of the letter recurring to her"
    rows = expand(mlx_backend, mlx_backend.tokenize(story), SearchParams()).suggestions
    assert rows and all(any(ch.isalnum() for ch in s.text) for s in rows)
    assert any(s.text.startswith(",") for s in rows)  # the comma is offered, with words after


@pytest.mark.parametrize(("story", "depth"), [("彼は学校に行くことに", 3), ("日本語の文章は", 2)])
def test_no_row_ends_in_half_a_character(mlx_backend, story, depth):
    result = expand(mlx_backend, mlx_backend.tokenize(story), SearchParams(max_depth=depth))
    assert result.suggestions
    for s in result.suggestions:
        assert "\ufffd" not in s.text
    # some beam went past the depth to end a character rather than show half of it
    assert any(len(s.token_ids) > depth + s.healed for s in result.suggestions)
