"""Bans and the repetition guard (`weave.story.bans`) in the search, on the fake model; the
list's forms and its hostile entries; the shipped slop list (bias: tests/test_bias.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from backends.base import Candidate
from tests.fake_backend import VOCAB, FakeBackend
from weave.config import ConfigError, load_settings, settings_from_table
from weave.desk.session import Workspace
from weave.interop.files import import_file
from weave.loom.store import LoomStore
from weave.loom.store_errors import BadImport
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams, ramify
from weave.story.bans import MAX_RULES, BanRule, Bans, bans_in, parse_list, slop_rules, with_bans
from weave.story.guard import Guard, banned_among

STORY_TEXT = "x"
STORY = [VOCAB.index("x")]


def run(table, bans: Bans | None, **params):
    defaults = dict(cutoff=0.1, max_depth=1, auto_stop=False, split_limit=3, max_suggestions=25)
    guard = Guard(bans, STORY_TEXT) if bans is not None else None
    return expand(FakeBackend(table), STORY, SearchParams(**{**defaults, **params}), guard=guard)


def texts(result) -> list[str]:
    return [s.text for s in result.suggestions]


def ban(*phrases: str, **options) -> Bans:
    return Bans(tuple(BanRule(p, **options) for p in phrases))


# -- pruning and room, on the fake model -------------------------------------------------------
def test_a_banned_branch_is_pruned_and_its_room_goes_to_the_next_candidate():
    table = lambda beam: {"a": 0.5, "b": 0.3, "c": 0.2}  # noqa: E731
    assert texts(run(table, None, max_suggestions=2)) == ["a", "b"]
    result = run(table, ban("b", whole_words=False), max_suggestions=2)
    assert texts(result) == ["a", "c"]  # still two suggestions
    assert [(p.text, p.by) for p in result.pruned] == [("b", "b")]


def test_a_banned_top_token_gives_way_to_the_next_one():
    table = lambda beam: {"a": 0.9, "b": 0.02}  # noqa: E731
    assert texts(run(table, None, cutoff=0.5)) == ["a"]
    assert texts(run(table, ban("a", whole_words=False), cutoff=0.5)) == ["b"]


def test_a_phrase_of_several_tokens_is_pruned_at_the_token_that_completes_it():
    # The story "x", then " " and "ab": the phrase "x ab" spans the story's end.
    table = lambda beam: {" ": 0.9} if not beam else {"ab": 0.5, "a": 0.4}  # noqa: E731
    result = run(table, ban("x ab"), max_depth=2)
    assert texts(result) == [" a"]
    assert [(p.text, p.by) for p in result.pruned] == [(" ab", "x ab")]


def test_whole_words_and_case_apply_to_bans():
    table = lambda beam: {"ab": 0.5, "a": 0.4}  # noqa: E731
    assert texts(run(table, ban("ab"))) == ["ab", "a"]  # "xab": "ab" is inside a word
    assert texts(run(table, ban("XAB", case_sensitive=True))) == ["ab", "a"]
    assert texts(run(table, ban("XAB"))) == ["a"]


def test_a_regex_ban_prunes_where_its_match_ends():
    table = lambda beam: {"ab": 0.5, "a": 0.4}  # noqa: E731
    assert texts(run(table, Bans((BanRule(r"x(ab|c)", regex=True),)))) == ["a"]


def test_the_repetition_guard_prunes_a_run_of_n_words_from_the_story():
    story = "The old man sat by the sea. Then"
    guard = Guard(Bans(no_repeat_words=3), story)
    state = guard.root()
    verdict = guard.step(state, b" the old")
    assert verdict.pruned_by is None  # "then the old" is no run of the story
    assert guard.step(verdict.state, b" man").pruned_by is None  # "man" is not finished
    assert guard.step(verdict.state, b" man,").pruned_by == "repeats “the old man”"
    assert guard.step(verdict.state, b" woman,").pruned_by is None
    off = Guard(Bans(), story)
    assert off.step(off.step(off.root(), b" the old").state, b" man,").pruned_by is None


def test_a_character_split_between_tokens_is_read_whole():
    guard = Guard(ban("é", whole_words=False), "x")
    half = guard.step(guard.root(), "é".encode()[:1])
    assert half.pruned_by is None
    assert guard.step(half.state, "é".encode()[1:]).pruned_by == "é"


def test_the_guard_off_leaves_the_search_as_it_was():
    for seed in range(5):
        params = SearchParams(cutoff=0.05, max_depth=4, max_suggestions=12)
        plain = expand(FakeBackend(seed=seed), STORY, params)
        guarded = expand(FakeBackend(seed=seed), STORY, params, guard=Guard(Bans(), "x"))
        assert texts(plain) == texts(guarded) and guarded.pruned == ()


def test_bans_never_appear_and_the_count_holds_on_random_models():
    bans = ban("b", "ca", whole_words=False)
    for seed in range(20):
        params = SearchParams(cutoff=0.05, max_depth=5, max_suggestions=10, auto_stop=False)
        plain = expand(FakeBackend(seed=seed), STORY, params)
        banned = expand(FakeBackend(seed=seed), STORY, params, guard=Guard(bans, "x"))
        assert not any("b" in t or "ca" in t for t in texts(banned))
        assert len(banned.suggestions) >= len(plain.suggestions) - 1


def test_a_beam_that_passes_over_a_banned_top_token_leaves_its_greedy_chain():
    # The chain went on through the banned top token: the beam taking the next one must
    # ask afresh, not read the chain's next positions (they follow the banned token).
    bans = ban("a", whole_words=False)
    for seed in range(20):
        params = SearchParams(cutoff=0.05, max_depth=5, max_suggestions=10)
        stepped = expand(FakeBackend(seed=seed), STORY, params, guard=Guard(bans, "x"))
        chained = expand(FakeBackend(seed=seed, chains=True), STORY, params,
                         guard=Guard(bans, "x"))  # fmt: skip
        assert texts(chained) == texts(stepped)


# -- the list: its forms and hostile entries ----------------------------------------------------
def test_a_list_as_plain_text_or_json_pairs():
    assert parse_list(b"a testament to\n# a comment\n\n  shivers  \r\n") == (
        BanRule("a testament to"),
        BanRule("  shivers  "),
    )
    rules = parse_list(json.dumps([["tapestry", -2.5], ["delve", None], "orbs", ["hope", 3]]))
    assert rules == (BanRule("tapestry", -2.5), BanRule("delve"), BanRule("orbs"),
                     BanRule("hope", 3))  # fmt: skip


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("ok\n" + "x\n" * MAX_RULES, "at most 10,000 phrases"),
        (json.dumps(["ok", ""]), "entry 2 is empty"),
        (json.dumps(["ok", "   "]), "entry 2 is empty"),
        ("ok\nbad\x07bell\n", r"line 2 \('bad\\x07bell'\) holds a control character"),
        (json.dumps(["ok", "\x00\x01"]), "entry 2 .* holds a control character"),
        ("ok\n" + "y" * 201, "line 2 holds at most 200 characters"),
        (json.dumps([["ok", 1], ["bad", 99]]), "entry 2: weight must be a number in -20..20"),
        (json.dumps([["ok", 1], ["bad", "high"]]), "entry 2: weight must be a number"),
        (json.dumps([["a", 1, 2]]), r"entry 1 must be a phrase or a \[phrase, weight\] pair"),
        ("[1, 2", "not a JSON list"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_hostile_list_is_one_error_naming_the_entry(data, message):
    with pytest.raises(ValueError, match=message):
        parse_list(data)


def test_a_bad_regex_or_rule_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"rules\[1\] \('\(unclosed'\) is not a valid regular"):
        Bans.from_dict({"rules": [{"text": "ok"}, {"text": "(unclosed", "regex": True}]})
    with pytest.raises(ValueError, match=r"rules\[0\] \('a\*'\) matches empty text"):
        Bans.from_dict({"rules": [{"text": "a*", "regex": True}]})
    with pytest.raises(ValueError, match=r"unknown field rules\[0\].colour"):
        Bans.from_dict({"rules": [{"text": "ok", "colour": "red"}]})
    with pytest.raises(ValueError, match="no_repeat_words must be 0"):
        Bans(no_repeat_words=1)


def test_bans_are_kept_in_a_storys_settings_and_read_back():
    bans = Bans((BanRule("delve"), BanRule("hope", 2.0), BanRule(r"\bnot \w+, but", regex=True)),
                no_repeat_words=4, slop=True)  # fmt: skip
    settings = with_bans({"other": 1}, bans)
    assert bans_in(json.loads(json.dumps(settings))).bans == bans
    assert with_bans(settings, Bans()) == {"other": 1} and bans_in({}).bans == Bans()


def test_the_shipped_slop_list_holds_200_phrases_and_compiles():
    rules = slop_rules()
    assert len(rules) >= 200 and all(r.banned for r in rules)
    assert len({r.text.lower() for r in rules}) == len(rules)
    guard = Guard(Bans(slop=True), "Her voice was")
    assert guard.step(guard.root(), b" barely above a whisper").pruned_by is not None


def test_a_sample_that_completes_a_banned_phrase_is_cut():
    table = lambda beam: {"a": 0.5, "b": 0.4}  # noqa: E731
    params = RamifyParams(n=8, max_tokens=4, seed=11)
    drawn = ramify(FakeBackend(table), STORY, params).samples
    assert any("b" in s.text for s in drawn) and any("b" not in s.text for s in drawn)
    cut = ramify(FakeBackend(table), STORY, params, guard=Guard(ban("b", whole_words=False), "x"))
    assert [s.text for s in cut.samples] == [s.text for s in drawn if "b" not in s.text]
    assert [p.text for p in cut.pruned] == [s.text for s in drawn if "b" in s.text]


# -- kept with the story -----------------------------------------------------------------------
def test_a_storys_bans_are_saved_exported_imported_and_guard_its_searches(tmp_path):
    ws = Workspace(LoomStore(tmp_path, busy_ms=50))
    assert ws.start("The old man sat by the sea.")
    bans = Bans((BanRule("sea"), BanRule("old", weight=1.0)), no_repeat_words=3)
    ws.set_settings(replace(ws.settings, bans=bans))
    again = Workspace(LoomStore(tmp_path, busy_ms=50))
    assert again.open(ws.story_id) and again.settings.bans == bans and again.spot.bans == bans
    copy = import_file(again.store, ws.library.export(ws.story_id))[0]
    assert again.open(copy) and again.settings.bans == bans
    guard = again.spot.guard()
    assert guard is not None and guard.step(guard.root(), b" The sea").pruned_by == "sea"
    ws.set_settings(replace(ws.settings, bans=Bans()))
    assert again.open(ws.story_id) and again.settings.bans == Bans() and again.spot.guard() is None
    bad = json.loads(ws.library.export(ws.story_id))
    bad["settings"] = {"bans": {"rules": [{"text": "(x", "regex": True}]}}
    with pytest.raises(BadImport, match=r"rules\[0\] \('\(x'\) is not a valid regular"):
        import_file(again.store, json.dumps(bad))


def test_config_tomls_default_list_goes_beside_the_storys_own():
    settings = settings_from_table(
        {"bans": {"phrases": ["delve"], "regexes": [r"not \w+, but"], "no_repeat_words": 5}}
    )
    own = Bans((BanRule("orbs"), BanRule("delve")), no_repeat_words=3, slop=True)
    joined = settings.bans.joined(own)
    assert [r.text for r in joined.rules] == ["delve", r"not \w+, but", "orbs"]
    assert joined.no_repeat_words == 3 and joined.slop
    assert settings.bans.joined(Bans()).no_repeat_words == 5
    with pytest.raises(ConfigError, match=r"\[bans\] regexes\[0\] \('\(x'\) is not a valid"):
        settings_from_table({"bans": {"regexes": ["(x"]}})
    with pytest.raises(ConfigError, match=r"\[bans\] unknown key 'phrase'"):
        settings_from_table({"bans": {"phrase": ["x"]}})
    assert load_settings().bans == Bans()  # the shipped config.toml bans nothing


def test_the_alternatives_the_bans_would_prune_are_marked():
    options = [Candidate(1, " spine", -0.1), Candidate(2, " back", -1.0), Candidate(3, "s", -2)]
    bans = ban("shivers down her spine", "downs")
    assert banned_among(bans, "It sent shivers down her", options) == {0: "shivers down her spine"}
    assert banned_among(bans, "ups and down", options) == {2: "downs"}
    assert banned_among(Bans(), "It sent shivers down her", options) == {}
