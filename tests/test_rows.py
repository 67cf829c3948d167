"""The rows a writer reads: near-duplicates one row, prefixes folded, openings first."""

from __future__ import annotations

import math

import pytest

from weave.search.rows import distinct_rows, key, opening
from weave.search.tree import Suggestion


def row(text: str, probability: float, score: float | None = None) -> Suggestion:
    logprob = math.log(probability)
    return Suggestion(
        text=text,
        token_ids=(len(text),),
        logprob=logprob,
        probability=probability,
        score=logprob if score is None else score,
        token_pieces=(text,),
        token_logprobs=(logprob,),
        exact=True,
    )


def ranked(*rows: Suggestion) -> list[Suggestion]:
    return sorted(rows, key=lambda s: -s.score)


def test_rows_differing_by_whitespace_or_final_punctuation_are_one():
    rows = ranked(row(" want of a wife,", 0.2), row(" want of a wife.", 0.1),
                  row("\nwant of  a wife", 0.05), row(" need of a friend.", 0.15))  # fmt: skip
    out = distinct_rows(rows, "joint")
    assert [r.text for r in out] == [" want of a wife,", " need of a friend."]
    wife = out[0]
    assert wife.variants == (" want of a wife.", "\nwant of  a wife")
    assert wife.probability == pytest.approx(0.35)
    assert wife.score == pytest.approx(math.log(0.35))  # joint: the row's probability
    assert wife.token_ids == rows[0].token_ids  # taking it takes the shown text


def test_a_row_that_another_extends_is_folded_into_the_best_such_row():
    rows = ranked(row(" moment", 0.3, -1.0), row(" moment to be sure,", 0.1, -2.0),
                  row(" moment to go.", 0.05, -3.0), row(" time.", 0.1, -2.5))  # fmt: skip
    out = distinct_rows(rows, "words")
    assert [r.text for r in out] == [" moment to be sure,", " time.", " moment to go."]
    assert out[0].variants == (" moment",) and out[0].score == -1.0  # the best member's
    assert out[0].probability == pytest.approx(0.4)


def test_each_opening_leads_before_any_shows_a_second_row():
    rows = ranked(row(" need of a good fortune.", 0.3), row(" need of a just reward.", 0.2),
                  row(" need of a worthy friend.", 0.15), row(" want of a wife.", 0.1),
                  row(" search of a bride.", 0.05))  # fmt: skip
    out = [r.text for r in distinct_rows(rows, "joint")]
    assert out == [" need of a good fortune.", " want of a wife.", " search of a bride.",
                   " need of a just reward.", " need of a worthy friend."]  # fmt: skip


def test_keys_and_openings_read_as_a_writer_does():
    assert key(" want of a wife.") == key("want of  a wife,\n") == ("want", "of", "a", "wife")
    assert opening(" The sea") == opening("the sea,") == "the"
    assert key(" ...") == () and opening(" ...") == " ..."


def assert_openings_first(rows) -> None:
    """Each opening's best row, best first, then the others, best first."""
    openings = [opening(r.text) for r in rows]
    leads = [i for i, o in enumerate(openings) if o not in openings[:i]]
    assert leads == list(range(len(leads)))
    for part in (rows[: len(leads)], rows[len(leads) :]):
        scores = [r.score for r in part]
        assert scores == sorted(scores, reverse=True)
