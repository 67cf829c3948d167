"""A writer's regular expressions on RE2 (weave.story.patterns): the patterns that froze
Python's `re` answer at once, alone and among 10,000; what RE2 has not is refused by name;
Python's spellings are translated; many patterns asked together find what each finds alone."""

from __future__ import annotations

import json
import random
import re
import time

import pytest

from tests.test_cli import weave
from weave.story.bans import BanRule, Bans, bans_in
from weave.story.patterns import (
    MAX_LIST_STEPS,
    Patterns,
    check_total,
    compile_pattern,
)
from weave.story.phrases import REGEX_WINDOW, PhraseSet

# Exponential (or high-degree polynomial) for a backtracking engine on ordinary text.
CATASTROPHIC = [r"(\w+\s?)+$", r"(a+)+$", r"(a|aa)+$", r"(a*)*b", r"(.*a){25}"]
SENTENCE = "She had not spoken to her brother in eleven years and when the phone rang at midnight"


def test_the_patterns_that_backtrack_forever_answer_at_once():
    texts = [SENTENCE + ",", "a" * REGEX_WINDOW + "!", ("a" * 30 + " ") * 7]
    for pattern in CATASTROPHIC:
        ps = PhraseSet([], [pattern])
        for text in texts:
            started = time.perf_counter()
            scan = ps.begin(text[:-1])
            ps.advance(scan, text[-1:])
            assert time.perf_counter() - started < 0.05, (pattern, text[:20])


def test_ten_thousand_patterns_and_the_catastrophic_ones_cost_a_step_little():
    rng = random.Random(5)
    words = SENTENCE.lower().split() + [f"w{i}" for i in range(3_000)]
    listed = [
        rf"\b{rng.choice(words)}\s+{rng.choice(words)}\s+{rng.choice(words)}\b"
        for _ in range(10_000 - len(CATASTROPHIC))
    ]
    started = time.perf_counter()
    ps = PhraseSet([], [*listed, *CATASTROPHIC])
    compiled = time.perf_counter() - started
    scan = ps.begin(SENTENCE)
    started = time.perf_counter()
    for piece in [" and", " she", " knew", ",", " before", "."] * 50:
        step = ps.advance(scan, piece)
        scan = step.scan if not step.completed else scan
    per_step = (time.perf_counter() - started) / 300
    assert compiled < 5 and per_step < 0.002, (compiled, per_step)


@pytest.mark.parametrize(
    ("pattern", "name"),
    [
        (r"(?<=her )brother", "a lookbehind (?<=…)"),
        (r"(?<!not )spoken", "a negative lookbehind (?<!…)"),
        (r"brother(?= in)", "a lookahead (?=…)"),
        (r"brother(?! in)", "a negative lookahead (?!…)"),
        (r"(\w+) \1", "a backreference \\1"),
        (r"(?P<w>\w+) (?P=w)", "a backreference (?P=name)"),
        (r"(a)?(?(1)b|c)", "a conditional (?(…)"),
        (r"(?>a+)b", "an atomic group (?>…)"),
        (r"a++b", "a possessive quantifier ++"),
        (r"a{2,3}+b", "a possessive quantifier {m,n}+"),
        (r"(?x) a b", "verbose mode (?x)"),
    ],
)
def test_what_re2_has_not_is_refused_by_name_where_it_is_entered(pattern, name):
    with pytest.raises(ValueError, match="uses " + re.escape(name)):
        compile_pattern(pattern)
    with pytest.raises(ValueError, match=r"bans: rule \(.*\) uses " + re.escape(name)):
        BanRule(pattern, regex=True)


def test_the_command_line_refuses_a_lookbehind_by_name_before_the_model_loads():
    done = weave("expand", "--story", SENTENCE, "--ban-regex", "(?<=her )brother")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --ban-regex #1 ('(?<=her )brother') uses a lookbehind (?<=…), which "
        "patterns cannot: they run in time linear in the text"
    )


def test_a_story_saved_with_a_lookbehind_opens_with_its_other_bans():
    settings = {
        "bans": {
            "rules": [
                {"text": "delve"},
                {"text": r"(?<=her )brother", "regex": True},
                {"text": r"\bnot \w+, but", "regex": True},
            ]
        }
    }
    saved = bans_in(settings)
    assert [r.text for r in saved.bans.rules] == ["delve", r"\bnot \w+, but"]
    assert saved.left_out == (
        "rules[1] ('(?<=her )brother') uses a lookbehind (?<=…), which patterns cannot: "
        "they run in time linear in the text",
    )


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        (r"end\Z", "the end", "end"),
        (r"caf\u00e9", "a café", "café"),
        (r"\N{EM DASH}", "so — then", "—"),
        (r"x{,2}y", "xxy", "xxy"),
        (r"[[:alpha:]]+", "x a]] y", "a]]"),  # Python: a set of [ : a l p h, then ]s
        (r"[]x]+", "]x]", "]x]"),
        (r"(?#a comment)then", "and then", "then"),
        (r"\pL+", "Ελένη", "Ελένη"),  # RE2's Unicode classes work too
        (r"\101", "BA", "A"),  # octal
    ],
)
def test_pythons_spellings_mean_what_they_mean_in_python(pattern, text, found):
    m = compile_pattern(pattern).rx.search(text)
    assert m is not None and m.group() == found


def test_a_list_too_large_compiled_is_refused_naming_the_cap():
    big = [compile_pattern(rf"\pL{{8}}{i}") for i in range(MAX_LIST_STEPS // 9_000 + 1)]
    with pytest.raises(ValueError, match=f"together compile to .* over {MAX_LIST_STEPS:,}"):
        check_total(big)
    rules = tuple(BanRule(p.text, regex=True) for p in big)
    with pytest.raises(ValueError, match="bans: the patterns together compile"):
        Bans(rules)


def test_patterns_asked_together_find_what_each_finds_alone():
    rng = random.Random(11)
    alphabet = "ab c.\n"
    pieces = ["a", "b", "ab", r"\b", r"\B", "^", "$", " ", r"\s", r"\w", ".", "c+", "(a|b)"]
    patterns = []
    while len(patterns) < 300:
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
        try:
            patterns.append(compile_pattern(text))
        except ValueError:
            continue  # matches empty text
    together = Patterns(patterns)
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        lo, cut = rng.randint(0, len(text)), rng.randint(0, len(text))
        alone = [
            i for i, p in enumerate(patterns) if any(m.end() > cut for m in p.rx.finditer(text, lo))
        ]
        assert together.ending_after(text, lo, cut) == alone, (text, lo, cut)


def test_the_catastrophic_patterns_answer_in_under_a_second_on_the_command_line():
    bans = [a for p in CATASTROPHIC for a in ("--ban-regex", p)]
    story = SENTENCE + "."  # a story ending in a stop: Python's `re` never came back
    done = weave("expand", "--story", story, *bans, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    plain = json.loads(weave("expand", "--story", story, "--json").stdout)
    assert out["stats"]["seconds"] < plain["stats"]["seconds"] + 1.0
    assert out["pruned"] > 0  # `(\w+\s?)+$` bans every piece that ends in a word
