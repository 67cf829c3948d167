"""The phrase matcher (`weave.story.phrases`) and the lorebook's one-pass keys
(`weave.story.lore_keys`).

The one-pass lorebook is checked against the rules it replaced: each key its own regular
expression (`old_fires` below, the code of `LoreEntry.fires` before), on random lorebooks
and stories with names inside names, keys of several words, case and punctuation. The
piece-by-piece scan is checked against the one-pass `find`.
"""

from __future__ import annotations

import random
import re
import time

import pytest

from weave.story.lore_keys import lore_keys
from weave.story.phrases import REGEX_WINDOW, Phrase, PhraseSet
from weave.story.steering import MAX_KEY_CHARS, MAX_KEYS, LoreEntry, Steering

TEXT = "Mirabel the Great met Mira. The kingdom's king, a#tag; the castle, the Castle."


def found(phrases, text, start=0):
    ps = PhraseSet(phrases)
    return [(ps.phrases[h.phrase].text, text[h.start : h.end]) for h in ps.find(text, start)]


def test_find_applies_whole_words_and_case_to_every_occurrence():
    phrases = [Phrase("Mira"), Phrase("Mirabel the Great"), Phrase("the king"),
               Phrase("king"), Phrase("#tag"), Phrase("Castle", case_sensitive=True)]  # fmt: skip
    assert found(phrases, TEXT) == [
        ("Mirabel the Great", "Mirabel the Great"),
        ("Mira", "Mira"),  # not the "Mira" inside "Mirabel"
        ("king", "king"),  # "the king" and "king" not inside "kingdom"
        ("#tag", "#tag"),  # no edge needed before "#"
        ("Castle", "Castle"),  # only the capital one
    ]


def test_find_reports_overlapping_and_nested_occurrences():
    phrases = [
        Phrase("the great", whole_words=False),
        Phrase("great met"),
        Phrase("a", whole_words=False),
    ]
    hits = found(phrases, "the great met a", 0)
    assert ("the great", "the great") in hits and ("great met", "great met") in hits
    assert hits.count(("a", "a")) == 2  # in "great" and alone


def test_phrases_that_match_alike_are_all_found():
    phrases = [Phrase("Mira"), Phrase("mira"), Phrase("Mira", case_sensitive=True),
               Phrase("MIRA", case_sensitive=True), Phrase("mira", whole_words=False)]  # fmt: skip
    ps = PhraseSet(phrases)
    assert [h.phrase for h in ps.find("Mira and Miranda")] == [0, 1, 2, 4, 4]
    assert ps.last_found("Mira and Miranda") == {0: 0, 1: 0, 2: 0, 4: 9}


def test_find_starts_at_start_but_reads_the_word_edge_before_it():
    assert found([Phrase("Mira")], "xMira Mira", 1) == [("Mira", "Mira")]
    assert [h.start for h in PhraseSet([Phrase("Mira")]).find("xMira Mira", 1)] == [6]


def pieces_of(text: str, rng: random.Random) -> list[str]:
    """`text` cut into pieces that each begin at a space (as most tokens do), sometimes
    mid-word too: a phrase ending at a piece's end then ends where a word ends."""
    cuts = sorted({m.start() for m in re.finditer(" ", text) if rng.random() < 0.7} | {0})
    return [text[a:b] for a, b in zip(cuts, cuts[1:] + [len(text)], strict=True)]


def test_the_piece_by_piece_scan_finds_what_the_one_pass_finds():
    rng = random.Random(3)
    words = ["Mira", "mirabel", "the", "king", "kingdom", "a", "#tag", "Castle", "old", "oak"]
    phrases = [Phrase("the king"), Phrase("Mira"), Phrase("old oak", case_sensitive=True),
               Phrase("a king", whole_words=False), Phrase("#tag"), Phrase("bel the")]  # fmt: skip
    ps = PhraseSet(phrases)
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(30))
        scan, completed = ps.begin(""), set()
        for piece in pieces_of(text, rng):
            step = ps.advance(scan, piece)
            scan = step.scan
            completed |= step.completed
        assert completed == {h.phrase for h in ps.find(text)}


def test_a_scan_reads_across_the_boundary_with_the_story():
    ps = PhraseSet([Phrase("shivers down her spine"), Phrase("a testament to")])
    scan = ps.begin("It sent shivers down")
    step = ps.advance(scan, " her")
    assert step.completed == set() and step.extended == {0}
    assert ps.advance(step.scan, " spine.").completed == {0}
    step = ps.advance(ps.begin("Rosa"), " testament")  # "a" inside "Rosa" is no word
    assert step.extended == set()
    step = ps.advance(ps.begin("It was a"), " testament")
    assert step.extended == {1}
    assert ps.advance(step.scan, " tower").extended == set()


def test_a_regex_completes_where_its_match_ends_inside_the_piece():
    ps = PhraseSet([Phrase("x")], [r"not \w+, but"])
    scan = ps.begin("It was not fear")
    assert ps.advance(scan, ", but").completed == {1}
    assert ps.advance(scan, ", and").completed == set()
    far = ps.begin("not " + "a" * (REGEX_WINDOW + 5))  # longer than the window: unseen
    assert ps.advance(far, ", but").completed == set()


@pytest.mark.parametrize(
    ("phrases", "regexes", "message"),
    [
        ([Phrase("ok"), Phrase("")], [], "phrase 2 is empty"),
        ([], ["fine", "(unclosed"], "regex 2 .*not a valid regular expression"),
        ([], ["a*"], "regex 1 .*matches empty text"),
    ],
)
def test_a_bad_phrase_or_regex_is_an_error_naming_it(phrases, regexes, message):
    with pytest.raises(ValueError, match=message):
        PhraseSet(phrases, regexes)


# -- the lorebook's one pass against the rules it replaced --------------------------------
def old_pattern(key: str, whole_words: bool) -> str:
    pattern = re.escape(key)
    if whole_words:
        pattern = ("(?<!\\w)" if re.match(r"\w", key[0]) else "") + pattern
        pattern += "(?!\\w)" if re.match(r"\w", key[-1]) else ""
    return pattern


def old_fires(entry: LoreEntry, story: str) -> bool:
    """`LoreEntry.fires` as it was: a regular-expression search per key."""
    if not entry.enabled or not entry.text:
        return False
    if entry.constant:
        return True
    flags = 0 if entry.case_sensitive else re.IGNORECASE
    start = max(0, len(story) - entry.scan_chars)

    def there(keys):
        return [re.compile(old_pattern(k.strip(), entry.whole_words), flags).search(story, start)
                is not None for k in keys if k.strip()]  # fmt: skip

    if not any(there(entry.keys)):
        return False
    seen = there(entry.secondary_keys)
    if not seen:
        return True
    logic = {"and_any": any, "and_all": all}
    if entry.logic in logic:
        return logic[entry.logic](seen)
    return not (any if entry.logic == "not_any" else all)(seen)


WORDS = ["Mira", "mira", "MIRANDA", "Miranda", "the", "king", "kingdom", "Dr.", "(Who)",
         "#tag", "a", "an", "Émile", "émile", "oak", "old", "x_y", "-", "river's"]  # fmt: skip


def random_entry(rng: random.Random) -> LoreEntry:
    def keys(n):
        return tuple(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 2)))
                     for _ in range(n))  # fmt: skip

    return LoreEntry(
        keys=keys(rng.randint(0, 3)) + (rng.choice(["", "  "]),) * (rng.random() < 0.1),
        text=rng.choice(["lore", ""]) if rng.random() < 0.1 else "lore",
        enabled=rng.random() > 0.1,
        case_sensitive=rng.random() < 0.3,
        whole_words=rng.random() < 0.7,
        scan_chars=rng.choice([5, 20, 60, 2000]),
        constant=rng.random() < 0.05,
        secondary_keys=keys(rng.choice([0, 0, 1, 2, 3])),
        logic=rng.choice(["and_any", "and_all", "not_any", "not_all"]),
    )


def test_the_one_pass_lorebook_fires_exactly_the_entries_the_old_rules_fired():
    rng = random.Random(7)
    for _ in range(300):
        lore = tuple(random_entry(rng) for _ in range(rng.randint(1, 12)))
        story = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
        story = story.replace(" -", "-") if rng.random() < 0.3 else story
        expected = tuple(e for e in lore if old_fires(e, story))
        assert Steering(lore=lore).fired(story) == expected, (lore, story)
        assert tuple(e for e in lore if e.fires(story)) == expected


def test_the_largest_lorebook_the_caps_allow_does_not_hang_a_search():
    """Before: 1,000 entries of 35 keys of 200 characters ran past 300 s per search."""
    rng = random.Random(1)
    vocab = [w.lower() for w in re.findall(r"[A-Za-z]+", " ".join(WORDS * 3) + TEXT)]
    vocab += ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(3000)]

    def key():
        return " ".join(rng.choice(vocab) for _ in range(60))[:MAX_KEY_CHARS].strip()

    lore = tuple(LoreEntry(tuple(key() for _ in range(MAX_KEYS)), "lore", scan_chars=100_000,
                           secondary_keys=tuple(key() for _ in range(MAX_KEYS)), logic="not_any")
                 for _ in range(200))  # fmt: skip
    story = " ".join(rng.choice(vocab) for _ in range(20_000))[:100_000] + " " + lore[3].keys[5]
    steering = Steering(lore=lore)
    steering.fired("")  # compiled once, on the first search
    started = time.perf_counter()
    fired = steering.fired(story)
    assert time.perf_counter() - started < 5.0  # a loose bound: bench/bench_lorebook.py measures it
    assert lore[3] in fired


def test_a_lorebook_equal_to_one_compiled_is_not_compiled_again():
    lore = (LoreEntry(("Mira", "the king"), "lore"), LoreEntry(("oak",), "tree"))
    again = Steering.from_dict(Steering(lore=lore).to_dict()).lore  # equal, not the same
    assert again == lore and again[0] is not lore[0]
    assert lore_keys(again) is lore_keys(lore)
    assert lore_keys(lore[:1]) is not lore_keys(lore)
