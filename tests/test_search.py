"""The search's rules on a deterministic fake model: hand-checked cases, then properties."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fake_backend import VOCAB, FakeBackend
from tests.test_rows import assert_openings_first
from weave.search.beams import OVERRUN, expand, stop_cut
from weave.search.params import SearchParams
from weave.search.rows import key
from weave.search.tree import TreeNode, suggestions_from

STORY = [VOCAB.index("x")]


def texts(result) -> list[str]:
    return [s.text for s in result.suggestions]


def run(table, **params):
    """A search on `table`, under LLooM v0.3's rule unless `params` name another."""
    defaults = dict(rule="v03", cutoff=0.25, multiplier=1.0, max_depth=2, auto_stop=False,
                    split_limit=3)  # fmt: skip
    return expand(FakeBackend(table), STORY, SearchParams(**{**defaults, **params}))


def test_top_token_always_continues_even_below_cutoff():
    result = run(lambda beam: {"a": 0.1, "b": 0.09}, cutoff=0.9, max_depth=3)
    assert texts(result) == ["aaa"]


def test_candidates_clearing_the_cutoff_split():
    table = {(): {"a": 0.5, "b": 0.3, "c": 0.15}}
    result = run(lambda beam: table.get(beam, {"x": 0.9}), max_depth=2)
    assert sorted(texts(result)) == ["ax", "bx"]


def test_split_limit_caps_children_and_zero_means_no_limit():
    table = {(): {"a": 0.3, "b": 0.3, "c": 0.3}}
    dist = lambda beam: table.get(beam, {"x": 0.99})  # noqa: E731
    assert sorted(texts(run(dist, split_limit=2))) == ["ax", "bx"]
    assert sorted(texts(run(dist, split_limit=0))) == ["ax", "bx", "cx"]


def test_multiplier_scales_the_cutoff_per_depth():
    dist = lambda beam: {"a": 0.4, "b": 0.35}  # noqa: E731
    # depth 0: cutoff 0.3 (both split); depth 1: 0.6 (neither splits)
    assert sorted(texts(run(dist, cutoff=0.3, multiplier=2.0))) == ["aa", "ba"]
    # depth 0: cutoff 0.38 (only 'a'); depth 1: 0.19 (both)
    assert sorted(texts(run(dist, cutoff=0.38, multiplier=0.5))) == ["aa", "ab"]


def test_the_relative_rule_splits_on_a_share_of_the_beams_top_candidate():
    # a flat distribution: no candidate clears 0.25 as a probability, all do as a share
    flat = {(): {"a": 0.3, "b": 0.25, "c": 0.2, ".": 0.02}}  # the 7 others: 0.033 each
    dist = lambda beam: flat.get(beam, {"x": 0.9})  # noqa: E731
    assert texts(run(dist, cutoff=0.26)) == ["ax"]
    relative = run(dist, rule="relative", cutoff=0.25, split_limit=0)  # 0.075 and over
    assert sorted(texts(relative)) == ["ax", "bx", "cx"]
    # a sure one: the same share lets nothing else through
    sure = {(): {"a": 0.9, "b": 0.1}}
    dist = lambda beam: sure.get(beam, {"x": 0.9})  # noqa: E731
    assert texts(run(dist, rule="relative", split_limit=0)) == ["ax"]


def test_the_relative_rule_is_wide_at_the_first_words_and_narrow_after():
    dist = lambda beam: {"a": 0.4, "b": 0.3, "c": 0.2}  # noqa: E731
    result = run(dist, rule="relative", cutoff=0.4, multiplier=3, split_limit=0, max_depth=3)
    # depth 0: 0.4 of the top (all three); depth 1: 1.2 of it (none); the top goes on
    assert sorted(texts(result)) == ["aaa", "baa", "caa"]


def test_at_the_cap_beams_go_on_unsplit_under_the_relative_rule_and_end_under_v03():
    dist = lambda beam: {"a": 0.4, "b": 0.3, "c": 0.2}  # noqa: E731
    kept = run(dist, rule="relative", cutoff=0.1, split_limit=0, max_depth=4, max_suggestions=3)
    assert sorted(texts(kept)) == ["aaaa", "baaa", "caaa"]  # no new beam; each to its depth
    v03 = run(dist, cutoff=0.1, split_limit=0, max_depth=4, max_suggestions=3)
    assert sorted(texts(v03)) == ["aa", "ba", "ca"]  # v0.3 ends each at the cap


def test_a_beam_of_punctuation_alone_goes_on_to_a_word():
    table = {(): {",": 0.9, "a": 0.05}, (",",): {" ": 0.9}, (",", " "): {"b": 0.9}}
    dist = lambda beam: table.get(beam, {".": 0.9})  # noqa: E731
    result = run(dist, cutoff=0.04, max_depth=1, auto_stop=True)
    by_text = {s.text: s for s in result.suggestions}
    assert set(by_text) == {"a", ", b"}  # max depth 1, but ", " is no suggestion
    assert len(by_text[", b"].token_ids) == 3
    # one that finds no word within OVERRUN tokens past the depth is none
    dots = run(lambda beam: {".": 0.9}, max_depth=1, auto_stop=True)
    assert dots.suggestions == [] and dots.tree.leaves()


def test_a_beam_cut_inside_a_character_shows_only_whole_ones():
    root = TreeNode(None, b"", 0.0)
    half = root.add_child(1, "x\U0001f466".encode()[:3], -0.1)  # "x" and half an emoji
    assert half.full_text() == "x" and not half.whole()
    whole = half.add_child(2, "\U0001f466".encode()[2:], -0.1)
    assert whole.full_text() == "x\U0001f466" and whole.whole()


def test_max_depth_bounds_every_beam():
    result = run(lambda beam: {"a": 0.5, "b": 0.4}, max_depth=4, max_suggestions=100)
    assert all(len(s.token_ids) == 4 for s in result.suggestions)


def test_auto_stop_cuts_after_the_stop_and_allows_a_leading_one():
    table = {(): {",": 0.9}, (",",): {"a": 0.9}, (",", "a"): {".": 0.9}}
    result = run(lambda beam: table.get(beam, {"b": 0.9}), auto_stop=True, max_depth=6)
    assert texts(result) == [",a."]


def test_auto_stop_cuts_inside_a_token():
    table = {(): {"a": 0.9}, ("a",): {".": 0.5, "ab": 0.4}}
    result = run(lambda beam: table.get(beam, {"b": 0.9}), auto_stop=True, max_depth=6)
    assert "a." in texts(result)
    assert stop_cut("x, y") == 2
    assert stop_cut(" , then.") == 8
    assert stop_cut("no stop") is None


def test_max_suggestions_is_exact_and_never_exceeded():
    flat = lambda beam: {t: 1 / 8 for t in "abc"}  # noqa: E731
    for cap in (1, 2, 5, 7, 25):
        result = run(flat, cutoff=0.0, split_limit=0, max_depth=8, max_suggestions=cap)
        assert len(result.suggestions) == cap


def test_duplicates_pool_probability():
    table = {(): {"a": 0.5, "ab": 0.3}, ("a",): {"b": 0.6}}
    dist = lambda beam: table.get(beam, {".": 0.9})  # noqa: E731
    result = run(dist, max_depth=3, cutoff=0.2, auto_stop=True)
    by_text = {s.text: s for s in result.suggestions}
    assert list(by_text) == ["ab."]  # "a"+"b"+"." and "ab"+"." are one suggestion
    pooled = by_text["ab."]
    paths = [0.5 * 0.6 * 0.9, 0.3 * 0.9]
    assert pooled.probability == pytest.approx(sum(paths), rel=1e-6)


def test_suggestions_equal_but_for_a_leading_space_pool_into_one():
    # LLooM v0.3's prefix-space rule: " a." and "a." show alike, so they are one row
    table = {(): {"a": 0.5, " ": 0.3}, (" ",): {"a": 0.9}}
    dist = lambda beam: table.get(beam, {".": 0.9})  # noqa: E731
    result = run(dist, max_depth=3, cutoff=0.2, auto_stop=True)
    assert texts(result) == ["a."]
    [pooled] = result.suggestions
    assert pooled.probability == pytest.approx(0.5 * 0.9 + 0.3 * 0.9 * 0.9, rel=1e-6)
    assert pooled.token_ids == tuple(VOCAB.index(t) for t in ("a", "."))  # the best beam's
    # only one leading space is the prefix space: a newline or a second space stays apart
    root = TreeNode(None, b"", 0.0)
    leaves = [root.add_child(i, piece, -1.0) for i, piece in enumerate([b"\nQQ", b"  QQ", b"QQ"])]
    assert sorted(s.text for s in suggestions_from(leaves, "joint")) == ["\nQQ", "  QQ", "QQ"]


def test_lloom_score_sums_raw_probabilities():
    table = {(): {"a": 0.5, "b": 0.4}, ("a",): {"c": 0.3}, ("b",): {"c": 0.9}}
    dist = lambda beam: table.get(beam, {"c": 0.9})  # noqa: E731
    joint = run(dist, score="joint", cutoff=0.35)
    lloom = run(dist, score="lloom", cutoff=0.35)
    assert texts(joint)[0] == "bc"  # 0.36 beats 0.15
    assert lloom.suggestions[0].score == pytest.approx(0.4 + 0.9, rel=1e-6)


def test_control_tokens_are_never_offered():
    table = {(): {"<eos>": 0.6, "a": 0.3}}
    result = run(lambda beam: table.get(beam, {"b": 0.9}), max_depth=2)
    assert texts(result) == ["ab"]


def test_each_depth_is_one_batched_call():
    backend = FakeBackend(lambda beam: {"a": 0.4, "b": 0.35})
    params = SearchParams(rule="v03", cutoff=0.3, multiplier=1.0, split_limit=3, max_depth=3,
                          auto_stop=False)  # fmt: skip
    expand(backend, STORY, params)
    assert backend.calls == [1, 2, 4]


def test_greedy_chains_give_the_same_tree_with_fewer_calls():
    params = SearchParams(cutoff=0.15, max_depth=8, max_suggestions=20, auto_stop=True)
    plain = expand(FakeBackend(seed=3), STORY, params)
    chained_backend = FakeBackend(seed=3, chains=True)
    chained = expand(chained_backend, STORY, params)
    assert [s.to_dict() for s in plain.suggestions] == [s.to_dict() for s in chained.suggestions]
    assert len(chained_backend.calls) < params.max_depth


def test_empty_story_is_a_clear_error():
    with pytest.raises(ValueError, match="empty"):
        expand(FakeBackend(seed=1), [], SearchParams())


def test_the_search_cuts_no_window_it_says_what_did_not_fit():
    """The one window cut is build_context's (test_steering.py): a search is sent a fitted
    context, searches exactly it, and refuses one that leaves no room for its depth."""
    backend = FakeBackend(seed=1, context_length=64)
    fits = STORY * (52 // len(STORY))
    assert expand(backend, fits, SearchParams(max_depth=12)).context_ids == tuple(fits)
    with pytest.raises(ValueError, match="do not fit the model's 64"):
        expand(backend, STORY * 200, SearchParams())
    with pytest.raises(ValueError, match="do not fit"):
        expand(backend, fits, SearchParams(max_depth=13))


def test_progress_is_reported_each_depth():
    seen = []
    params = SearchParams(cutoff=0.9, max_depth=5, auto_stop=False)
    expand(FakeBackend(seed=2), STORY, params, progress=seen.append)
    assert [p.depth for p in seen] == [1, 2, 3, 4, 5]
    assert seen[-1].beams_done >= 1 and seen[-1].tokens_evaluated > 0


def test_a_backend_reading_ahead_reports_before_the_first_depth():
    class ReadingBackend(FakeBackend):
        def read_ahead(self, context, k, report):
            self.asked = (list(context), k)
            for read in (2, len(context)):
                report(read, len(context))

    seen, backend = [], ReadingBackend(seed=2)
    expand(backend, STORY, SearchParams(max_depth=2), progress=seen.append)
    assert backend.asked[0] == STORY and backend.asked[1] >= 2
    assert [(p.depth, p.story_read, p.story_tokens) for p in seen[:2]] == [
        (0, 2, len(STORY)),
        (0, len(STORY), len(STORY)),
    ]
    depths = [p.depth for p in seen[2:]]  # then each depth (and any past it: OVERRUN)
    assert depths[:2] == [1, 2] and depths == list(range(1, len(depths) + 1))
    backend.asked = None
    expand(backend, STORY, SearchParams(max_depth=2))  # no one watching: no reading ahead
    assert backend.asked is None


def test_parameters_are_bounded():
    for bad in (dict(cutoff=1.5), dict(max_depth=0), dict(split_limit=11), dict(score="max")):
        with pytest.raises(ValueError):
            SearchParams(**bad)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cutoff=st.floats(0.0, 0.6),
    multiplier=st.floats(0.5, 1.5),
    split_limit=st.integers(0, 4),
    rule=st.sampled_from(["relative", "v03"]),
    max_depth=st.integers(1, 7),
    max_suggestions=st.integers(1, 30),
    auto_stop=st.booleans(),
    score=st.sampled_from(["words", "joint", "lloom"]),
    chains=st.booleans(),
)
def test_properties(seed, cutoff, multiplier, split_limit, rule, max_depth, max_suggestions,
                    auto_stop, score, chains):  # fmt: skip
    params = SearchParams(
        rule=rule,
        cutoff=cutoff,
        multiplier=multiplier,
        split_limit=split_limit,
        max_depth=max_depth,
        max_suggestions=max_suggestions,
        auto_stop=auto_stop,
        score=score,
    )
    backend = FakeBackend(seed=seed, chains=chains)
    result = expand(backend, STORY, params)
    leaves = result.tree.leaves()
    assert len(result.suggestions) <= max_suggestions
    assert len(leaves) <= max_suggestions  # finished beams never exceed the cap
    # every beam offers a word, unless none came within OVERRUN tokens past the depth
    assert result.suggestions or not any(_worded(leaf.text()) for leaf in leaves)
    paths = {tuple(leaf.token_ids()) for leaf in leaves}
    for s in result.suggestions:
        assert s.token_ids in paths  # every suggestion is a path of the tree
        assert 1 <= len(s.token_ids) <= max_depth + OVERRUN
        if len(s.token_ids) > max_depth:  # it went on only to reach its first word
            assert not _worded(_spelled(s.token_ids[:max_depth]))
        assert _worded(s.text) and "\ufffd" not in s.text
        assert 0.0 <= s.probability <= 1.0 + 1e-9
        assert s.logprob == pytest.approx(math.log(s.probability))
        assert not auto_stop or stop_cut(s.text) in (None, len(s.text))
    assert len({key(s.text) for s in result.suggestions}) == len(result.suggestions)
    assert_openings_first(result.suggestions)
    if score == "joint":
        assert all(s.score == pytest.approx(s.logprob) for s in result.suggestions)
    plain = expand(FakeBackend(seed=seed), STORY, params)
    assert [s.to_dict() for s in plain.suggestions] == [s.to_dict() for s in result.suggestions]


def test_saved_settings_stand_in_for_the_defaults_only_where_their_fields_take_them():
    defaults = SearchParams()
    saved = {"cutoff": 1, "max_depth": 99, "score": "lloom", "auto_stop": "yes", "other": 1}
    values, refused = SearchParams.from_saved(saved, defaults)
    # a cutoff saved before the rule was: set under v0.3's, which comes with it
    assert values == {"cutoff": 1.0, "score": "lloom", "rule": "v03"}
    assert type(values["cutoff"]) is float
    assert refused == ("max_depth = 99", "auto_stop = 'yes'")  # never clamped: named
    assert SearchParams.from_saved({}, defaults) == ({}, ())


def _spelled(ids) -> str:
    return "".join(VOCAB[i] for i in ids)


def _worded(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def test_a_story_keeps_the_rule_with_any_knob_it_keeps():
    defaults = SearchParams()
    assert SearchParams(max_depth=6).to_saved(defaults) == {"max_depth": 6}
    assert SearchParams(cutoff=0.1).to_saved(defaults) == {"cutoff": 0.1, "rule": "relative"}
    v03 = defaults.under("v03")
    assert (v03.cutoff, v03.multiplier, v03.split_limit) == (0.2, 1.0, 3)
    assert v03.to_saved(defaults) == {"cutoff": 0.2, "multiplier": 1.0, "split_limit": 3,
                                      "rule": "v03"}  # fmt: skip
    assert defaults.under("relative") is defaults
    # what is kept reads back as it was
    for params in (SearchParams(cutoff=0.1), v03):
        values, refused = SearchParams.from_saved(params.to_saved(defaults), defaults)
        assert replace(defaults, **values) == params and not refused
