"""Steering: the settings' JSON form, lorebook keys, the context builder, lorebook files.

The builder is pure, so most tests drive it with a byte tokenizer; one test runs it on
the embedded model's real tokenizer for the property the MLX cache relies on (a stable
token prefix across accepts) and for control-token names staying text.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from weave.story.context import build_context, note_position
from weave.story.lorebook import MAX_LOREBOOK_BYTES, MAX_NESTING, parse_lorebook, read_lorebook
from weave.story.steering import MAX_ENTRIES, MAX_MEMORY_CHARS, LoreEntry, Steering


def tokenize(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def detokenize(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def build(steering: Steering, text: str, **kwargs):
    return build_context(steering, text, tokenize=tokenize, detokenize=detokenize, **kwargs)


def entry(*keys: str, text: str = "lore", **kwargs) -> LoreEntry:
    return LoreEntry(tuple(keys), text, **kwargs)


def common_prefix(a, b) -> int:
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


# -- the context's parts -----------------------------------------------------------------
def test_memory_then_fired_lore_then_story_ending_where_the_story_ends():
    lore = (entry("Tom", text="Tom is tall."), entry("Mira", text="Mira has red hair."))
    story = "Once upon a time, Mira ran"
    context = build(Steering(memory="A spy story.", lore=lore), story)
    assert [(p.kind, p.text) for p in context.parts] == [
        ("memory", "A spy story.\n"),
        ("lore", "Mira has red hair.\n"),
        ("story", story),
    ]
    assert context.fired == (lore[1],)
    assert context.text == "A spy story.\nMira has red hair.\n" + story
    assert list(context.ids) == tokenize(context.text)
    assert context.ids[-len(story) :] == tuple(tokenize(story))
    assert context.token_count == len(context.ids) and context.left_out == 0


def test_no_steering_is_the_story_itself():
    context = build(Steering(), "Once upon a time")
    assert context.ids == tuple(tokenize("Once upon a time")) and context.prefix_len == 0
    assert [p.kind for p in context.parts] == ["story"]


def test_fired_entries_keep_the_lorebook_order():
    lore = (entry("b", text="B"), entry("a", text="A"), entry("c", text="C"))
    context = build(Steering(lore=lore), "a b")
    assert [p.text for p in context.parts if p.kind == "lore"] == ["B\n", "A\n"]
    assert [p.label for p in context.parts if p.kind == "lore"] == ["b", "a"]


@pytest.mark.parametrize(
    ("story", "depth", "expected"),
    [
        ("a\nb\nc\nd", 3, "a\n[N]\nb\nc\nd"),
        ("a\nb\nc\nd", 1, "a\nb\nc\n[N]\nd"),
        ("a\n\nb\n\nc", 1, "a\n\nb\n\n[N]\nc"),  # blank lines are no lines
        ("a\n\nb\n\nc", 2, "a\n\n[N]\nb\n\nc"),
        ("a\nb\n", 1, "a\n[N]\nb\n"),  # the line just begun is no line yet
        ("one line only", 3, "[N]\none line only"),  # fewer lines: before the start
        ("a\nb", 5, "[N]\na\nb"),
    ],
)
def test_the_note_is_its_own_line_at_its_depth(story, depth, expected):
    context = build(Steering(note="[N]", note_depth=depth), story)
    assert context.text == expected
    assert [p.kind for p in context.parts][-1] == "story"  # ends where the story ends
    assert list(context.ids) == tokenize(expected)


def test_note_position_counts_lines_from_the_end():
    assert note_position("", 3) == 0
    assert note_position("x\ny", 1) == 2


# -- the stable prefix the KV cache relies on --------------------------------------------
def test_with_memory_and_no_note_the_ids_are_prefix_then_the_storys_own_ids():
    lore = (entry("Mira", text="Mira has red hair."),)
    steering = Steering(memory="A spy story.", lore=lore)
    text = "Mira ran home"
    own = [7, *tokenize("ira ran home")]  # an accepted beam's ids, not a fresh tokenization
    context = build(steering, text, story_ids=own)
    assert context.ids == context.prefix_ids + tuple(own)
    beam = tokenize(" and hid")
    after = build(steering, text + " and hid", story_ids=own + beam)
    assert after.ids == context.ids + tuple(beam)  # accept: nothing before the beam changed


def test_with_a_note_an_accept_changes_only_the_ids_from_the_note_on():
    steering = Steering(memory="M.", note="[dark]", note_depth=2)
    text = "One.\nTwo.\nThree.\nFour"
    before = build(steering, text)
    same_line = build(steering, text + " and five")
    assert same_line.ids[: len(before.ids)] == before.ids  # no new line: 0 prefill
    new_line = build(steering, text + ".\nFive")
    assert common_prefix(before.ids, new_line.ids) >= len(tokenize("M.\nOne.\nTwo.\n"))
    assert new_line.text == "M.\nOne.\nTwo.\nThree.\n[dark]\nFour.\nFive"


MERGED = 300  # a fake token for "\nS": the story's ids do not split at the note's line


def merging_tokenize(text: str) -> list[int]:
    ids, i = [], 0
    while i < len(text):
        if text.startswith("\nS", i):
            ids.append(MERGED)
            i += 2
        else:
            ids.append(ord(text[i]))
            i += 1
    return ids


def merging_detokenize(ids: list[int]) -> str:
    return "".join("\nS" if i == MERGED else chr(i) for i in ids)


def test_a_tokenizer_that_merges_across_the_line_start_still_spells_the_story():
    steering = Steering(note="[N]", note_depth=1)
    context = build_context(
        steering, "Ab\nSo", tokenize=merging_tokenize, detokenize=merging_detokenize
    )
    assert context.text == "Ab\n[N]\nSo"
    assert merging_detokenize(list(context.ids)) == context.text
    story = "x" * 50 + "\nSo"  # 52 ids, but 51 + 2 once split at the note's line
    for max_tokens in range(6, 60):
        fitted = build_context(
            steering, story, tokenize=merging_tokenize, detokenize=merging_detokenize,
            max_tokens=max_tokens,
        )  # fmt: skip
        assert fitted.token_count <= max_tokens and fitted.text.endswith("[N]\nSo")


# -- trimming ----------------------------------------------------------------------------
def test_trimming_cuts_the_storys_start_and_keeps_memory_lore_and_note():
    lore = (entry("end", text="Lore."),)
    steering = Steering(memory="Memory.", note="Note.", note_depth=1, lore=lore)
    story = "x" * 300 + "\nthe end"
    context = build(steering, story, max_tokens=120)
    assert [p.kind for p in context.parts] == ["memory", "lore", "story", "note", "story"]
    assert context.token_count <= 120 and context.left_out > 0
    assert context.token_count + context.left_out == len(build(steering, story).ids)
    assert context.text.endswith("Note.\nthe end")
    assert "left out before]" in context.marked_text()


def test_trimming_reaches_past_the_note_when_the_lines_after_it_are_long():
    steering = Steering(memory="M.", note="N.", note_depth=1)
    context = build(steering, "short\n" + "y" * 200, max_tokens=50)
    assert [p.kind for p in context.parts] == ["memory", "note", "story"]
    assert context.token_count <= 50 and context.text.endswith("y")


def test_the_cut_moves_in_steps_so_growing_stories_share_a_prefix():
    steering = Steering(memory="Memory.")
    story = "".join(random.Random(0).choices("abcdefghij ", k=500))
    cuts, previous, shared = set(), None, 0
    for n in range(400, 500):
        context = build(steering, story[:n], max_tokens=208)
        assert context.token_count <= 208 and context.prefix_ids == tuple(tokenize("Memory.\n"))
        cuts.add(context.left_out)
        if previous is not None:
            shared += context.ids[: len(previous.ids)] == previous.ids
        previous = context
    assert len(cuts) <= 3  # 100 one-token accepts, room 200: a cut every 50 tokens
    assert shared >= 97


def test_steering_that_leaves_no_room_for_the_story_is_one_error():
    with pytest.raises(ValueError, match="leaving no room for the story"):
        build(Steering(memory="m" * 50), "story", max_tokens=40)


def test_ids_alone_are_enough():
    context = build_context(
        Steering(memory="M."), None, tokenize=tokenize, detokenize=detokenize,
        story_ids=tokenize("Hi"),
    )  # fmt: skip
    assert context.text == "M.\nHi"
    with pytest.raises(ValueError, match="text or its ids"):
        build_context(Steering(), None, tokenize=tokenize, detokenize=detokenize)


# -- keys --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("lore_entry", "story", "fires"),
    [
        (entry("Mira"), "and Mira ran", True),
        (entry("Mira"), "and MIRA ran", True),  # case-insensitive by default
        (entry("Mira", case_sensitive=True), "and MIRA ran", False),
        (entry("Mira"), "Miranda ran", False),  # whole words by default
        (entry("Mira"), "Mira's knife, Mira.", True),
        (entry("Mira", whole_words=False), "Miranda ran", True),
        (entry("the king"), "the kingdom", False),
        (entry("the king"), "for the king!", True),
        (entry("#tag"), "a#tag", True),  # an edge that is no word character needs no boundary
        (entry("Émile"), "dit Émile.", True),
        (entry("Émile"), "Émilette", False),
        (entry("Dr. (Who)?"), "Dr. (Who)? again", True),  # regex characters are literal
        (entry("Dr. (Who)?"), "Dr. Who", False),
        (entry("a.c", whole_words=False), "abc", False),
        (entry("/drag.n/i"), "dragon", False),  # SillyTavern's regex form is literal here
        (entry(""), "anything", False),
        (entry("  "), "any  thing", False),
        (entry(), "anything", False),  # no key never fires
        (entry(constant=True), "anything", True),
        (entry("Mira", enabled=False), "Mira", False),
        (entry("Mira", text=""), "Mira", False),
        (entry("Mira", scan_chars=10), "Mira" + "." * 20, False),
        (entry("Mira", scan_chars=30), "Mira" + "." * 20, True),
        (entry("Mira", scan_chars=24), "xMira" + "." * 20, False),  # "Mira" cut from "xMira"
        (entry("a", secondary_keys=("b", "c")), "a b", True),  # and_any
        (entry("a", secondary_keys=("b", "c")), "a", False),
        (entry("a", secondary_keys=("b", "c"), logic="and_all"), "a b", False),
        (entry("a", secondary_keys=("b", "c"), logic="and_all"), "a c b", True),
        (entry("a", secondary_keys=("b", "c"), logic="not_any"), "a b", False),
        (entry("a", secondary_keys=("b", "c"), logic="not_any"), "a", True),
        (entry("a", secondary_keys=("b", "c"), logic="not_all"), "a b", True),
        (entry("a", secondary_keys=("b", "c"), logic="not_all"), "a b c", False),
        (entry("a", secondary_keys=("",), logic="and_all"), "a", True),
    ],
)
def test_when_an_entry_fires(lore_entry, story, fires):
    assert lore_entry.fires(story) is fires


# -- the JSON form -----------------------------------------------------------------------
FULL = Steering(
    memory="Mira is a spy.",
    note="[dark]",
    note_depth=4,
    lore=(
        entry("Mira", "Mi", text="Red hair.", name="Mira", case_sensitive=True, scan_chars=500),
        entry("a", text="A.", enabled=False, whole_words=False, constant=True,
              secondary_keys=("b",), logic="not_any"),
    ),
)  # fmt: skip


def test_the_json_form_round_trips():
    data = json.loads(json.dumps(FULL.to_dict()))
    assert Steering.from_dict(data) == FULL
    assert Steering.from_dict({}) == Steering()
    assert Steering().note_depth == 3 and entry("k").scan_chars == 2000


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(colour="red"), "unknown field colour"),
        (lambda d: d["lore"][1].update(priority=3), r"unknown field lore\[1\].priority"),
        (lambda d: d.update(memory=5), "memory must be text"),
        (lambda d: d.update(note_depth=True), "note_depth must be a whole number"),
        (lambda d: d.update(note_depth=0), r"note_depth must be a whole number in 1..1,000"),
        (lambda d: d.update(lore={}), "lore must be a list"),
        (lambda d: d["lore"].append("x"), r"lore\[2\] must be an object"),
        (lambda d: d["lore"][0].update(keys="Mira"), r"lore\[0\].keys must be a list of text"),
        (lambda d: d["lore"][0].update(keys=["a", 1]), r"lore\[0\].keys\[1\] must be text"),
        (lambda d: d["lore"][0].update(enabled=1), r"lore\[0\].enabled must be true or false"),
        (lambda d: d["lore"][0].pop("text"), r"lore\[0\] needs keys and text"),
        (lambda d: d["lore"][0].update(logic="or"), r"lore\[0\].logic must be one of"),
        (lambda d: d["lore"][0].update(scan_chars=0), r"lore\[0\].scan_chars must be"),
        (lambda d: d.update(memory="m" * (MAX_MEMORY_CHARS + 1)), "memory holds at most"),
        (lambda d: d["lore"][0].update(keys=["k" * 201]), r"lore\[0\].keys\[0\] holds at most"),
        (lambda d: d["lore"][0].update(keys=["k"] * 101), r"lore\[0\].keys holds at most"),
        (lambda d: d.update(lore=[d["lore"][0]] * (MAX_ENTRIES + 1)), "lore holds at most"),
    ],
)
def test_bad_json_is_one_error_naming_the_field(change, message):
    data = FULL.to_dict()
    change(data)
    with pytest.raises(ValueError, match=message) as caught:
        Steering.from_dict(data)
    assert "\n" not in str(caught.value)


def test_values_are_checked_when_made_too():
    with pytest.raises(ValueError, match="note_depth"):
        Steering(note_depth=0)
    with pytest.raises(ValueError, match="keys must be a tuple"):
        LoreEntry(["Mira"], "text")  # type: ignore[arg-type]


# -- lorebook files ----------------------------------------------------------------------
SILLYTAVERN = {
    "entries": {
        "0": {
            "uid": 0, "key": ["Mira", "the spy"], "keysecondary": [], "comment": "Mira",
            "content": "Mira is a spy with red hair.", "constant": False, "vectorized": False,
            "selective": True, "selectiveLogic": 0, "addMemo": True, "order": 100,
            "position": 0, "disable": False, "excludeRecursion": False,
            "preventRecursion": False, "delayUntilRecursion": False, "probability": 100,
            "useProbability": True, "depth": 4, "group": "", "groupOverride": False,
            "groupWeight": 100, "scanDepth": None, "caseSensitive": None,
            "matchWholeWords": None, "useGroupScoring": None, "automationId": "",
            "role": None, "sticky": 0, "cooldown": 0, "delay": 0, "displayIndex": 0,
        },
        "1": {
            "uid": 1, "key": ["Castle"], "keysecondary": ["night", "dark"],
            "comment": "The castle at night", "content": "The castle is haunted at night.",
            "constant": False, "selective": True, "selectiveLogic": 3, "order": 50,
            "disable": False, "caseSensitive": True, "matchWholeWords": False,
        },
        "2": {
            "uid": 2, "key": [], "keysecondary": [], "comment": "World",
            "content": "The year is 1921.", "constant": True, "selective": False,
            "selectiveLogic": 0, "order": 10, "disable": False,
        },
        "3": {
            "uid": 3, "key": ["Tom"], "keysecondary": ["hat"], "comment": "Tom (off)",
            "content": "Tom is tall.", "constant": False, "selective": False,
            "selectiveLogic": 2, "order": 200, "disable": True,
        },
    },
    "originalData": {"name": "Spy world", "entries": []},
}  # fmt: skip


def write(tmp_path, data, name="lore.json"):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return path


def test_a_sillytavern_world_info_file_is_read(tmp_path):
    lore = read_lorebook(write(tmp_path, SILLYTAVERN))
    assert [e.name for e in lore] == ["World", "The castle at night", "Mira", "Tom (off)"]
    world, castle, mira, tom = lore
    assert world.constant and world.keys == () and world.text == "The year is 1921."
    assert castle.case_sensitive and not castle.whole_words
    assert castle.secondary_keys == ("night", "dark") and castle.logic == "and_all"
    assert mira.keys == ("Mira", "the spy") and not mira.case_sensitive and mira.whole_words
    assert mira.scan_chars == 2000 and mira.enabled
    assert not tom.enabled and tom.secondary_keys == ()  # not selective: no filter
    context = build(Steering(lore=lore), "At night, the Castle was dark. the spy waited")
    assert [p.label for p in context.parts if p.kind == "lore"] == [
        "World", "The castle at night", "Mira",
    ]  # fmt: skip
    assert not castle.fires("At night, the castle was dark.")  # case-sensitive
    assert not castle.fires("The Castle at night.")  # and_all: "dark" is missing


CHARACTER_BOOK = {
    "name": "Spy world",
    "description": "",
    "scan_depth": 50,
    "token_budget": 500,
    "recursive_scanning": False,
    "extensions": {},
    "entries": [
        {
            "keys": ["Mira"], "content": "Mira is a spy.", "extensions": {}, "enabled": True,
            "insertion_order": 20, "case_sensitive": False, "name": "Mira", "priority": 10,
            "id": 1, "comment": "", "selective": True, "secondary_keys": ["knife"],
            "constant": False, "position": "before_char",
        },
        {
            "keys": ["Castle"], "content": "A castle.", "extensions": {}, "enabled": False,
            "insertion_order": 10, "comment": "The castle", "selective": False,
            "secondary_keys": ["night"],
        },
    ],
}  # fmt: skip


def test_a_character_book_alone_or_in_a_card_is_read(tmp_path):
    castle, mira = read_lorebook(write(tmp_path, CHARACTER_BOOK))
    assert (castle.name, castle.enabled, castle.secondary_keys) == ("The castle", False, ())
    assert (mira.name, mira.keys, mira.secondary_keys) == ("Mira", ("Mira",), ("knife",))
    assert mira.fires("Mira drew her knife") and not mira.fires("Mira smiled")
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Mira", "description": "A spy.", "character_book": CHARACTER_BOOK}}  # fmt: skip
    assert read_lorebook(write(tmp_path, card, "card.json")) == (castle, mira)


def test_our_own_form_is_read_back(tmp_path):
    assert read_lorebook(write(tmp_path, FULL.to_dict())) == FULL.lore
    assert read_lorebook(write(tmp_path, {"lore": []})) == ()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not JSON"),
        (b'{"lore": [], "x": NaN}', "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2]", "neither a LLooM lorebook"),
        (b'{"name": "x"}', "neither a LLooM lorebook"),
        (b'{"entries": "x"}', "must be an object of entries"),
        (b'{"entries": [{"keys": "Mira"}]}', r"entries\[0\].keys must be a list of text"),
        (b'{"entries": [{"insertion_order": null}]}', "insertion_order must be a number"),
        (b'{"spec": "chara_card_v2", "data": {"name": "Mira"}}', "no character_book"),
        (b'{"entries": {"0": "text"}}', r"entries\['0'\] must be an object"),
        (b'{"entries": {"0": {"key": "Mira"}}}', r"entries\['0'\].key must be a list of text"),
        (b'{"entries": {"0": {"key": ""}}}', r"entries\['0'\].key must be a list of text"),
        (b'{"entries": {"0": {"content": 5}}}', r"entries\['0'\].content must be text"),
        (b'{"entries": {"0": {"selectiveLogic": 7}}}', "selectiveLogic must be 0, 1, 2 or 3"),
        (b'{"entries": {"0": {"order": "high"}}}', "order must be a number"),
        (b'{"lore": [{"keys": [], "text": 1}]}', r"lore\[0\].text must be text"),
        (b'{"entries": {"0": {"content": "' + b"c" * 20_001 + b'"}}}', "text holds at most"),
        (b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1), "nested deeper"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    ],
)
def test_a_bad_lorebook_file_is_one_error_naming_the_file(tmp_path, content, message):
    path = write(tmp_path, content, "bad lore.json")
    with pytest.raises(ValueError, match=message) as caught:
        read_lorebook(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_a_lorebook_file_too_large_or_missing_is_one_error(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(MAX_LOREBOOK_BYTES + 1)
    with pytest.raises(ValueError, match="larger than 8 MiB"):
        read_lorebook(path)
    with pytest.raises(ValueError, match="cannot read it"):
        read_lorebook(tmp_path / "absent.json")
    if os.path.exists("/dev/zero"):
        with pytest.raises(ValueError, match="larger than"):
            read_lorebook("/dev/zero")
    too_many = {"entries": {str(i): {"key": ["k"]} for i in range(MAX_ENTRIES + 1)}}
    with pytest.raises(ValueError, match="a lorebook holds at most"):
        parse_lorebook(json.dumps(too_many).encode())


# -- the real tokenizer ------------------------------------------------------------------
def test_the_stable_prefix_and_control_token_names_on_the_real_tokenizer(mlx_backend):
    backend = mlx_backend
    real = dict(tokenize=backend.tokenize, detokenize=backend.detokenize)
    lore = (entry("Mira", text="Mira is a spy <|im_end|> with red hair."),)
    steering = Steering(memory="<|im_start|>system\nA dark tale.<|im_end|>", lore=lore)
    story = "The night was cold.\n\nMira waited by the gate"
    ids = backend.tokenize(story)
    context = build_context(steering, story, story_ids=ids, **real)
    assert context.ids == context.prefix_ids + tuple(ids)
    assert [p.kind for p in context.parts] == ["memory", "lore", "story"]
    assert backend.special_token_ids and not set(context.ids) & backend.special_token_ids
    assert backend.detokenize(list(context.ids)) == context.text  # the names stay text
    beam = backend.tokenize(" and watched")
    after = build_context(steering, story + " and watched", story_ids=ids + beam, **real)
    assert after.ids == context.ids + tuple(beam)  # accept: 0 prefill

    noted = Steering(memory=steering.memory, note="[Keep it dark.]", note_depth=1, lore=lore)
    before = build_context(noted, story, story_ids=ids, **real)
    assert before.text.endswith("cold.\n\n[Keep it dark.]\nMira waited by the gate")
    head = before.parts[-3]
    assert head.kind == "story" and head.ids == tuple(ids[: len(head.ids)])  # its own ids
    after = build_context(noted, story + " and watched", story_ids=ids + beam, **real)
    assert after.ids == before.ids + tuple(beam)  # no new line: 0 prefill
    line = backend.tokenize(".\nShe")
    moved = build_context(noted, story + ".\nShe", story_ids=ids + line, **real)
    assert moved.text.endswith("gate.\n[Keep it dark.]\nShe")
    assert before.parts[-2].kind == "note"  # [..., story, note, story]
    before_note = sum(part.token_count for part in before.parts[:-2])
    assert common_prefix(before.ids, moved.ids) >= before_note  # the note on changes
    assert backend.detokenize(list(moved.ids)) == moved.text

    indented = "Verse one\n  and two"  # "\n " is one token: no boundary at the line start
    split = build_context(noted, indented, story_ids=backend.tokenize(indented), **real)
    assert split.text.endswith("Verse one\n[Keep it dark.]\n  and two")
    assert backend.detokenize(list(split.ids)) == split.text


def test_accepting_under_memory_lore_and_a_note_costs_no_prefill_on_mlx(fresh_mlx_backend):
    from weave.search.beams import expand
    from weave.search.params import SearchParams

    backend = fresh_mlx_backend
    real = dict(tokenize=backend.tokenize, detokenize=backend.detokenize)
    params = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=8, auto_stop=False)
    lore = (entry("fox", text="The fox is a trickster who never tells the truth."),)
    for note in ("", "[Keep it dark.]"):
        steering = Steering(memory="A fable in the old style.", note=note, lore=lore)
        text = "The night fell.\nThe fox crept to the well.\nThere,"
        ids = tuple(backend.tokenize(text))
        context = build_context(steering, text, story_ids=ids, **real)
        first = expand(backend, list(context.ids), params)
        assert first.stats.prefill_tokens <= context.token_count
        accepted = next(s for s in first.suggestions if s.exact and "\n" not in s.text)
        text, ids = text + accepted.text, ids + accepted.token_ids  # as an accept appends
        after = build_context(steering, text, story_ids=ids, **real)
        assert after.ids == context.ids + accepted.token_ids
        second = expand(backend, list(after.ids), params)
        assert second.stats.prefill_tokens == 0, note
