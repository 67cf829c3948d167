"""Token healing (`weave.search.healing`) and the search's use of it, on the fake model and its
greedy tokenizer: where the boundary falls, which tokens a held beam may take, their
renormalised probabilities, and suggestions shown as what follows the typed text."""

from __future__ import annotations

import json
import math

import pytest

from tests.background import ended
from tests.fake_backend import VOCAB, FakeBackend
from weave.desk.lookahead import LookAhead
from weave.desk.spot import Draw, Offer
from weave.search.beams import expand
from weave.search.codec import search_from_dict, search_to_dict
from weave.search.healing import Constraint, heal, narrowed, typed_start
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams, ramify

PARAMS = SearchParams(cutoff=0.2, max_depth=3, auto_stop=False, split_limit=3)


def ids(*tokens: str) -> list[int]:
    return [VOCAB.index(t) for t in tokens]


def healed(story: list[int], backend: FakeBackend | None = None):
    fake = backend or FakeBackend()
    return heal(story, fake.detokenize, fake.tokenize)


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("opened its ey", 10),  # the word with its space
        ("its eyes and ", 12),  # trailing whitespace
        ("its eyes and \n ", 12),
        ("two words", 3),
        ("ends here.", None),  # punctuation: nothing is being typed
        ("a quote'", None),
        ("word", None),  # nothing before it to search from
        ("", None),
    ],
)
def test_the_typed_end_is_the_trailing_whitespace_or_the_last_word(text, start):
    assert typed_start(text) == start


def test_the_boundary_is_the_last_token_start_before_the_typed_word():
    healing = healed(ids("x", " ", "ab"))  # "x ab": the word " ab" was being typed
    assert (healing.context, healing.typed, healing.tokens) == (tuple(ids("x")), " ab", 2)


def test_trailing_whitespace_is_given_back_alone():
    healing = healed(ids("x", "a", " "))
    assert (healing.context, healing.typed, healing.tokens) == (tuple(ids("x", "a")), " ", 1)


def test_a_story_ending_in_punctuation_or_one_word_is_not_healed():
    assert healed(ids("x", "a", ".")) is None
    assert healed(ids("ab")) is None


def test_a_word_longer_than_the_backoff_is_healed_from_its_last_tokens():
    story = ids("x", " ", "a", "b", "c", "a", "b")  # " abcab": five tokens of one word
    healing = healed(story)
    assert healing.tokens == 4 and healing.typed == "bcab"
    fake = FakeBackend()
    assert fake.detokenize(list(healing.context)) + healing.typed == fake.detokenize(story)


def test_a_whole_text_in_one_id_is_cut_as_text():
    class OneId(FakeBackend):  # a text API's backend: one id holds the story
        def detokenize(self, ids):
            return "x ab" if ids else ""

    healing = healed([0], OneId())
    assert healing.context == tuple(ids("x")) and healing.typed == " ab"


def test_a_token_is_allowed_where_it_agrees_with_the_typed_text_as_far_as_both_go():
    held = Constraint(b" ey")
    assert held.allows(b"", b" eyes") and held.allows(b"", b" ey") and held.allows(b"", b" e")
    assert not held.allows(b"", b" a") and not held.allows(b"", b"ey")
    assert held.allows(b" e", b"yes") and not held.allows(b" e", b"x")
    assert not held.allows(b"", b"")  # an empty token spells nothing: it would never end
    assert held.active(b" e") and not held.active(b" ey") and not held.active(b" eyes")


def test_allowed_candidates_are_renormalised_over_the_allowed_ones():
    options = FakeBackend(lambda beam: {"ab": 0.3, "a": 0.1, "b": 0.5}).distribution([0])
    kept = narrowed(Constraint(b"a"), b"", options, k=5)
    assert [c.text for c in kept] == ["ab", "a"]
    assert [math.exp(c.logprob) for c in kept] == pytest.approx([0.75, 0.25])


def test_a_healed_search_spells_the_typed_text_and_shows_what_follows():
    table = {
        (): {"b": 0.6, " ": 0.3, "a": 0.1},  # after "x": the space is the only allowed
        (" ",): {"c": 0.5, "ab": 0.3, "a": 0.1},  # then "ab" and "a" agree with "a"
        (" ", "ab"): {"c": 0.9},
        (" ", "a"): {"b": 0.9},
    }
    fake = FakeBackend(lambda beam: table.get(beam, {".": 0.9}))
    result = expand(fake, ids("x", " ", "a"), PARAMS)  # "x a", typed " a"
    assert result.typed == " a" and result.context_ids == tuple(ids("x"))
    texts = {s.text: s for s in result.suggestions}
    # " abc." and " ab..": what follows " a", 3 tokens past it ("ab" reaches past: it counts)
    assert set(texts) == {"bc.", "b.."}
    best = texts["bc."]
    assert best.token_ids == tuple(ids(" ", "ab", "c", "."))
    assert best.healed == 2 and best.token_pieces == ("", "b", "c", ".")
    # " " is all the allowed mass at depth 0; "ab" 0.75 of it at depth 1.
    assert best.token_logprobs[:2] == pytest.approx((0.0, math.log(0.75)))
    assert best.after(tuple(ids("x", " ", "a"))) == tuple(ids("x", " ", "ab", "c", "."))


def test_the_tokens_that_only_spell_the_typed_text_do_not_count_against_max_depth():
    fake = FakeBackend(lambda beam: {"a": 0.9})
    result = expand(fake, ids("x", " ", "a"), PARAMS)  # " ", "a" spell it, then 3 more
    assert [len(s.token_ids) for s in result.suggestions] == [PARAMS.max_depth + 2]


def test_after_a_trailing_space_no_suggestion_starts_with_another():
    table = {("a",): {"b": 0.5, " the": 0.3, " ": 0.2}, ("a", " the"): {"c": 0.9}}
    fake = FakeBackend(lambda beam: table.get(beam, {".": 0.9}))
    result = expand(fake, ids("x", "a", " "), PARAMS)  # "xa ": typed " "
    # " the" reaches past the typed " ": it counts (3 tokens past it); "..." is none
    assert [s.text for s in result.suggestions] == ["thec."]
    assert math.exp(result.suggestions[0].token_logprobs[0]) == pytest.approx(0.6)


def test_a_stop_right_after_the_typed_word_goes_on_to_a_word():
    """ "…recurring to her" once offered a lone ",": auto-stop read the typed word as the
    beam's first, so the comma after it ended the beam. A suggestion (what follows the
    typed text) may start with a stop, and goes on to at least one word."""
    table = {(" ",): {"a": 0.9}, (" ", "a"): {",": 0.9}, (" ", "a", ","): {" the": 0.9}}
    fake = FakeBackend(lambda beam: table.get(beam, {",": 0.9}))
    params = SearchParams(cutoff=0.2, max_depth=4, auto_stop=True, split_limit=3)
    result = expand(fake, ids("x", " ", "a"), params)  # "x a": typed " a"
    assert [s.text for s in result.suggestions] == [", the,"]


def test_healing_off_searches_from_the_story_as_typed():
    fake = FakeBackend(lambda beam: {"b": 0.9})
    result = expand(fake, ids("x", " ", "a"), PARAMS, healing=False)
    assert result.typed == "" and result.suggestions[0].text == "bbb"
    assert result.suggestions[0].healed == 0


def test_where_a_backend_returns_no_allowed_candidate_nothing_is_offered():
    class Narrow(FakeBackend):
        heal_k = 2  # a server that answers two candidates: neither agrees with " a"

    fake = Narrow(lambda beam: {"b": 0.6, "c": 0.3})
    assert expand(fake, ids("x", " ", "a"), PARAMS).suggestions == []


def test_a_healed_suggestion_is_taken_as_text_not_as_the_ids():
    table = {(): {" ": 0.9}, (" ",): {"ab": 0.9}}
    fake = FakeBackend(lambda beam: table.get(beam, {".": 0.9}))
    result = expand(fake, ids("x", " ", "a"), PARAMS)
    piece = Offer("n1", PARAMS, result).piece(result.suggestions[0])
    assert piece.text == "b.." and not piece.exact  # "ab" and two more past the typed " a"


def test_look_ahead_searches_from_the_story_a_healed_suggestion_makes():
    story, fake = ids("x", " ", "a"), FakeBackend(seed=3)
    shown = expand(fake, story, PARAMS)
    ahead = LookAhead(2)
    ahead.start(fake, story, shown.suggestions, PARAMS)
    ended(ahead, timeout=30)
    for s in [s for s in shown.suggestions if s.exact][:2]:
        accepted = ids("x") + list(s.token_ids)  # the typed " a" and what follows, as ids
        assert fake.detokenize(accepted) == "x a" + s.text
        found, after = ahead.take("fake-model", accepted, PARAMS), expand(fake, accepted, PARAMS)
        assert found is not None and found.suggestions == after.suggestions
        assert found.tree.to_dict() == after.tree.to_dict()


def test_samples_are_healed_as_the_search_is():
    table = {(): {"b": 0.6, " ": 0.4}, (" ",): {"ab": 0.5, "c": 0.5}}
    fake = FakeBackend(lambda beam: table.get(beam, {".": 0.9}))
    params = RamifyParams(n=4, seed=1, max_tokens=3)
    result = ramify(fake, ids("x", " ", "a"), params)  # " " then "ab": all that is allowed
    assert [s.text for s in result.samples] == ["b..."] * 4  # 3 more tokens than typed
    for sample in result.samples:
        assert sample.healed == 2 and sample.token_ids == tuple(ids(" ", "ab", ".", ".", "."))
        assert sample.logprob == pytest.approx(3 * math.log(0.9))
    piece = Draw("n1", params, result).piece(result.samples[0])
    assert piece.text == "b..." and not piece.exact


def test_a_sample_with_no_allowed_beginning_is_not_drawn():
    class Narrow(FakeBackend):
        heal_k = 2

    fake = Narrow(lambda beam: {"b": 0.6, "c": 0.3})
    assert ramify(fake, ids("x", " ", "a"), RamifyParams(n=3, seed=1)).samples == []


def test_the_search_s_json_says_what_was_typed_and_reads_it_back():
    fake = FakeBackend(lambda beam: {" ": 0.5, "ab": 0.4})
    result = expand(fake, ids("x", " ", "a"), PARAMS)
    data = search_to_dict(result, PARAMS)
    assert data["typed"] == " a" and data["suggestions"][0]["healed"] == 2
    back = search_from_dict(json.loads(json.dumps(data)))
    assert back.params == PARAMS
    assert back.result.typed == " a" and back.result.suggestions == result.suggestions
    assert "typed" not in search_to_dict(expand(fake, ids("x", "."), PARAMS))
