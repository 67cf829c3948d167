"""The ranking scores (`weave.search.scores`): hand-checked values, then the ranking a search on
the fake model gives under each."""

from __future__ import annotations

import math

import pytest

from tests.fake_backend import VOCAB, FakeBackend
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.search.scores import beam_score, ends_clause, words


def test_words_is_the_log_probability_per_word():
    lps = [math.log(0.4), math.log(0.5), math.log(0.5)]  # joint ln 0.1 = -2.3026
    assert beam_score(lps, " looked up.", "words") == pytest.approx(math.log(0.1) / 2)
    assert beam_score(lps, " looked up", "words") == pytest.approx(math.log(0.1) / 2 - 1)
    assert beam_score(lps, " looked up.", "joint") == pytest.approx(math.log(0.1))
    assert beam_score(lps, " looked up.", "lloom") == pytest.approx(1.4)


@pytest.mark.parametrize(
    "text, count, ends",
    [(" However,", 1, True), (" he said;", 2, True), (" she ran", 2, False), ("!", 1, True),
     (" ", 1, False), ("\n\n", 1, False), (" a. ", 1, True), ("", 1, False)],
)  # fmt: skip
def test_words_and_clause_ends(text, count, ends):
    assert words(text) == count
    assert ends_clause(text) is ends


STUB_OR_CLAUSE = {
    (): {"a": 0.5, "b": 0.4},
    ("a",): {".": 0.9},  # "a." : one word, 0.45
    ("b",): {" the": 0.9},  # "b the the the." : four words, 0.4 * 0.9^4 = 0.262
    ("b", " the"): {" the": 0.9},
    ("b", " the", " the"): {" the": 0.9},
    ("b", " the", " the", " the"): {".": 0.9},
}


def ranked(score: str, max_depth: int = 6) -> list[str]:
    backend = FakeBackend(lambda beam: STUB_OR_CLAUSE.get(beam, {"c": 0.9}))
    params = SearchParams(cutoff=0.35, max_depth=max_depth, score=score, auto_stop=True)
    return [s.text for s in expand(backend, [VOCAB.index("x")], params).suggestions]


def test_joint_puts_the_stub_first_and_words_the_clause():
    assert ranked("joint") == ["a.", "b the the the."]  # ln 0.45 > ln 0.262
    assert ranked("words") == ["b the the the.", "a."]  # -1.34 / 4 = -0.34 > -0.80 / 1


def test_words_marks_down_a_clause_cut_at_the_depth():
    # four tokens: "b the the the" has no end; -1.23 / 4 - 1 = -1.31 < -0.80
    assert ranked("words", max_depth=4) == ["a.", "b the the the"]


def test_words_is_the_default():
    assert SearchParams().score == "words"
