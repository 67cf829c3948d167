"""Bias (`weave.story.bias`): which tokens a phrase's spellings weigh, beam by beam, on a
toy tokenizer; the biased distribution, renormalised; and in the search on the fake model,
a favoured phrase brought in from below the top-k where the backend can weigh it, said
plainly where it cannot."""

from __future__ import annotations

import math

import pytest

from tests.fake_backend import VOCAB, FakeBackend
from weave.cli import to_text
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.story.bans import BanRule, Bans
from weave.story.bias import BiasState, TokenBias, reweighed, variants
from weave.story.guard import Guard
from weave.view.messages import search_status

# A toy vocabulary, which splits these words as SmolLM2 does (but " pineapple", one token
# there): "Pineapple" is "P", "ine", "apple".
TOY = [" sea", "sea", "Sea", " Sea", "se", "a", "s", "'s", " woman", " pine", "pine", "apple",
       "P", "ine", " Pine", " the", "the", "The", " The", "\n", "(", " ", "é", "x"]  # fmt: skip


def toy_ids(text: str) -> list[int]:
    """Greedy, longest piece first; a character the toy lacks reads as "x"."""
    ids, i = [], 0
    while i < len(text):
        piece = max((t for t in TOY if text.startswith(t, i)), key=len, default="x")
        ids.append(TOY.index(piece))
        i += max(len(piece), 1)
    return ids


def toy_text(ids: list[int]) -> str:
    return "".join(TOY[i] for i in ids)


def compiled(*rules: BanRule) -> TokenBias:
    return TokenBias(rules, toy_ids, toy_text)


def named(bias: TokenBias, state: BiasState) -> dict[str, float]:
    return {TOY[i]: w for i, w in bias.weights_at(state).items()}


def walk(bias: TokenBias, state: BiasState, *pieces: str) -> BiasState:
    for piece in pieces:
        state = bias.step(state, TOY.index(piece), piece.encode())
    return state


# -- the tokens a phrase's spellings weigh --------------------------------------------------------
def test_variants_are_spaced_and_cased_as_the_rule_allows():
    assert variants(BanRule("sea", 4.0)) == ["sea", "Sea", " sea", " Sea"]
    assert variants(BanRule("sea", 4.0, case_sensitive=True)) == ["sea", " sea"]


def test_sea_weighs_the_tokens_that_spell_it_and_none_that_merely_end_in_s():
    bias = compiled(BanRule("sea", 4.0))
    story = "the old woman"
    inside = bias.root(toy_ids(story), story)  # the story ends inside a word
    assert named(bias, inside) == {" sea": 4.0, " Sea": 4.0}
    after_s = walk(bias, inside, "'s")  # "woman's": a word goes on, no edge
    assert named(bias, after_s) == {" sea": 4.0, " Sea": 4.0}
    for edge in ("\n", "(", " "):  # at a word edge the unspaced spellings may start too
        assert named(bias, walk(bias, inside, edge)) == {
            " sea": 4.0, " Sea": 4.0, "sea": 4.0, "Sea": 4.0,
        }  # fmt: skip
    loose = compiled(BanRule("sea", 4.0, whole_words=False))  # anywhere, inside words too
    assert named(loose, after_s)["sea"] == 4.0


def test_each_next_token_only_after_the_ones_before_it_of_that_spelling():
    bias = compiled(BanRule("pineapple", 10.0))
    story = "there was a"
    root = bias.root(toy_ids(story), story)
    assert named(bias, root) == {" pine": 10.0, " Pine": 10.0}
    assert "apple" not in named(bias, walk(bias, root, " woman"))  # "apple" alone: nothing
    after = walk(bias, root, " pine")
    assert named(bias, after)["apple"] == 10.0  # " pine" then "apple"
    assert "apple" not in named(bias, walk(bias, after, "s"))  # the spelling was left
    capital = walk(bias, walk(bias, root, "\n"), "P", "ine")
    assert named(bias, capital)["apple"] == 10.0  # "Pineapple" at a line's start


def test_a_favoured_phrase_is_favoured_until_spelled_and_a_disfavoured_one_stays_so():
    bias = compiled(BanRule("sea", 4.0), BanRule("the", -3.0))
    state = walk(bias, bias.root(toy_ids("x"), "x"), " sea", " the")
    assert named(bias, state) == {" the": -3.0, " The": -3.0}
    assert state.spelled == frozenset({0})


def test_weights_of_two_rules_add_and_a_rule_counts_once_an_id():
    bias = compiled(BanRule("the sea", 2.0), BanRule("the", 1.0))
    root = bias.root(toy_ids("x"), "x")
    assert named(bias, root)[" the"] == 3.0
    going = walk(bias, root, " the")
    assert named(bias, going)[" sea"] == 2.0
    repeat = compiled(BanRule("the the", 2.0))  # " the" starts it and goes on with it
    assert named(repeat, walk(repeat, repeat.root(toy_ids("x"), "x"), " the"))[" the"] == 2.0


def test_a_spelling_the_story_ends_inside_goes_on_at_the_root():
    bias = compiled(BanRule("pineapple", 10.0), BanRule("sea", 1.0))
    assert named(bias, bias.root(toy_ids("a pine"), "a pine"))["apple"] == 10.0
    # "pine" unspaced starts the phrase only at a word edge: "(pine" does, "apine" not
    assert named(bias, bias.root(toy_ids("(pine"), "(pine"))["apple"] == 10.0
    assert "apple" not in named(bias, bias.root(toy_ids("apine"), "apine"))


def test_a_character_split_between_tokens_is_no_word_edge_until_whole():
    bias = compiled(BanRule("sea", 4.0))
    half = bias.step(BiasState(), TOY.index("é"), "é".encode()[:1])
    assert not half.edge and half.pending
    whole = bias.step(half, TOY.index("é"), "é".encode()[1:])
    assert not whole.edge and not whole.pending  # "é" is a letter
    assert walk(bias, whole, "(").edge


# -- the biased distribution, renormalised --------------------------------------------------------
@pytest.mark.parametrize("weight", [-20.0, -5.0, 0.5, 5.0, 20.0])
def test_reweighed_is_the_biased_distribution_over_the_whole_vocabulary(weight):
    options = FakeBackend(seed=3).distribution([0])  # the whole fake vocabulary
    probs = {c.token_id: math.exp(c.logprob) for c in options}
    biased = {options[0].token_id: weight, options[-1].token_id: -weight}
    out = reweighed(options, biased)
    total = sum(p * math.exp(biased.get(i, 0.0)) for i, p in probs.items())
    for cand in out:
        expected = probs[cand.token_id] * math.exp(biased.get(cand.token_id, 0.0)) / total
        assert math.isclose(math.exp(cand.logprob), expected, rel_tol=1e-9)
    assert math.isclose(sum(math.exp(c.logprob) for c in out), 1.0, rel_tol=1e-9)
    assert [c.logprob for c in out] == sorted((c.logprob for c in out), reverse=True)


def test_reweighed_from_the_top_k_alone_is_never_above_certain():
    options = FakeBackend(seed=1).distribution([0])[:3]  # the ids past the top 3 unknown
    for weight in (20.0, -20.0):
        out = reweighed(options, {c.token_id: weight for c in options} | {10_000: 20.0})
        assert all(c.logprob <= 0.0 for c in out)
        assert sum(math.exp(c.logprob) for c in out) <= 1.0 + 1e-12
    nearly_all = [options[0].__class__(1, "a", math.log1p(-1e-17)), options[1]]
    assert reweighed(nearly_all, {1: 20.0})[0].logprob <= 0.0


# -- in the search, on the fake model -------------------------------------------------------------
STORY = [VOCAB.index("x")]
# " the" shares what these leave with five more tokens (1/600 each): the 9th token, below the
# top 8 that a beam asks for at 4 suggestions.
LIKELY = {"a": 0.5, "b": 0.3, ",": 0.1, ".": 0.05, " ": 0.04}
RARE = 0.01 / 6


def search(backend, bans: Bans, **params):
    defaults = dict(max_depth=1, auto_stop=False, max_suggestions=4, use_chains=True)
    guard = Guard(bans, "x")
    return expand(backend, STORY, SearchParams(**{**defaults, **params}), guard=guard)


def favour(text: str, weight: float) -> Bans:
    """A rule spelled as written only (the fake model's vocabulary has no capitals)."""
    return Bans((BanRule(text, weight, case_sensitive=True, whole_words=False),))


def first_logprob(result, text: str) -> float:
    return next(s for s in result.suggestions if s.text == text).token_logprobs[0]


def test_a_favoured_token_below_the_top_k_is_brought_in_where_the_backend_weighs_it():
    table = lambda beam: LIKELY  # noqa: E731
    plain = search(FakeBackend(table), Bans())
    assert " the" not in [s.text for s in plain.suggestions]
    reached = search(FakeBackend(table), favour(" the", 8.0))
    share = RARE * math.e**8 / (1 + RARE * (math.e**8 - 1))  # renormalised
    assert math.isclose(math.exp(first_logprob(reached, " the")), share, rel_tol=1e-9)
    assert reached.suggestions[0].text == " the" and reached.notes == ()


def test_a_backend_that_cannot_weigh_them_says_so_once():
    table = lambda beam: LIKELY  # noqa: E731
    unreached = search(FakeBackend(table, reach=False), favour(" the", 8.0), max_depth=3)
    assert " the" not in [s.text for s in unreached.suggestions]
    [note] = unreached.notes
    assert note.startswith("fake gives the log-probabilities of its top candidates only")
    assert search_status(unreached).endswith(f" · {note}")  # the page's status line
    assert f"\nnote: {note}" in to_text(unreached, SearchParams())  # the command line's
    disfavoured = search(FakeBackend(table, reach=False), favour(" the", -8.0))
    assert disfavoured.notes == ()


def test_bias_moves_a_candidate_across_the_cutoff_both_ways_renormalised():
    table = lambda beam: {"a": 0.6, "b": 0.05, "ab": 0.001}  # noqa: E731
    params = dict(cutoff=0.1, split_limit=3, max_suggestions=25)
    assert [s.text for s in search(FakeBackend(table), Bans(), **params).suggestions] == ["a"]
    favoured = search(FakeBackend(table), favour("b", 2.0), **params)
    assert sorted(s.text.strip() for s in favoured.suggestions) == ["a", "b"]
    # "b" and " b" (" ", "b": " " starts it too) are favoured: Z counts both
    space = (1 - 0.651) / 8
    z = 1 + (0.05 + space) * (math.e**2 - 1)
    assert math.isclose(math.exp(first_logprob(favoured, "b")), 0.05 * math.e**2 / z)
    sunk = search(FakeBackend(table), favour("a", -5.0), **params)
    assert sunk.suggestions[0].text == "b"  # the biased top is the first candidate now


@pytest.mark.parametrize("weight", [-20.0, 20.0])
def test_any_weight_gives_probabilities_no_edge_above_certain(weight):
    for seed in range(8):
        params = dict(cutoff=0.05, max_depth=4, max_suggestions=12, auto_stop=True)
        result = search(FakeBackend(seed=seed), favour("a", weight), **params)
        nodes = [n for leaf in result.tree.leaves() for n in leaf.path()]
        assert result.suggestions and all(n.logprob <= 0.0 for n in nodes)
        assert all(0.0 <= s.probability <= 1.0 for s in result.suggestions)


def test_no_greedy_chain_while_a_phrase_is_favoured():
    backend = FakeBackend(seed=2, chains=True)
    search(backend, favour("b", 3.0), max_depth=4, cutoff=0.05)
    chained = FakeBackend(seed=2, chains=True)
    search(chained, favour("b", -3.0), max_depth=4, cutoff=0.05)
    assert backend.chained == 0 and chained.chained > 0
