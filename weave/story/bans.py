"""Bans, bias and the repetition guard: what a writer forbids or favours in suggestions.

A writer's list (`Bans`) holds rules (`BanRule`): a phrase, literal (with the lorebook's
case and whole-word options, `weave.story.phrases`) or a regular expression, that is either
  banned   (weight None): a beam whose text, read across the boundary with the story's
           end, completes it is pruned at that token (`weave.search` gives its room to the
           next candidates), or
  biased   (a weight, in log-probability units, + favours, - disfavours; literal only):
           the weight goes to the tokens that spell the phrase, before the search's
           cutoff, so a favoured phrase can clear it and a disfavoured one sinks
           (`weave.story.bias`, which compiles them with the model's tokenizer);
and the repetition guard (`no_repeat_words` N, 0 = off, the default): a beam that
completes a run of N words (case folded) found in the story's last
`weave.story.guard.REPEAT_CHARS` characters is pruned at the token that completes its last
word. `slop` switches on the shipped list of phrases common in model prose
(weave/story/data/slop.txt, banned).

Where a list comes from: `Bans.to_dict` / `from_dict` (strict, kept with the story under
`SETTINGS_KEY` like its steering), `parse_list` (a file: one phrase per line, or a JSON
list of `[phrase, weight]` pairs, weight null for a ban), `weave.config`'s default list.
Every problem (a list over `MAX_RULES`, an empty phrase, a control character, a phrase
over `MAX_RULE_CHARS`, an invalid regex or one using what RE2 has not, such as a
lookbehind (`weave.story.patterns`: patterns run in linear time), a weight out of range)
is one `ValueError` naming the entry. A list's phrases are compiled once (`Bans.compiled`,
for the guard and the bias); `weave.story.guard.Guard` is the list read for one story,
which the search asks about each candidate token. This module holds the rules and their
files, and knows nothing of backends, pages or stores.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from weave.story.patterns import MAX_LIST_STEPS, Pattern, check_total, compile_pattern
from weave.story.phrases import Phrase, PhraseSet

MAX_RULES = 10_000
MAX_RULE_CHARS = 200
MAX_WEIGHT = 20.0
MAX_REPEAT_WORDS = 50
SETTINGS_KEY = "bans"
SLOP_FILE = Path(__file__).parent / "data" / "slop.txt"


@dataclass(frozen=True)
class BanRule:
    """One phrase banned (weight None) or biased (see the module docstring)."""

    text: str
    weight: float | None = None
    regex: bool = False
    case_sensitive: bool = False
    whole_words: bool = True
    pattern: Pattern | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", _check_rule(self, "rule"))  # frozen: set once

    @property
    def banned(self) -> bool:
        return self.weight is None


@dataclass(frozen=True)
class Bans:
    """A writer's bans and bias. The default bans nothing."""

    rules: tuple[BanRule, ...] = ()
    no_repeat_words: int = 0  # 0: the repetition guard is off
    slop: bool = False  # the shipped slop list, banned
    _compiled: _Compiled | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check(isinstance(self.rules, tuple), "rules must be a tuple of BanRule")
        _check(len(self.rules) <= MAX_RULES, f"a list holds at most {MAX_RULES:,} phrases")
        n = self.no_repeat_words
        whole = isinstance(n, int) and not isinstance(n, bool)
        _check(
            whole and (n == 0 or 2 <= n <= MAX_REPEAT_WORDS),
            f"no_repeat_words must be 0 (off) or a whole number in 2..{MAX_REPEAT_WORDS}",
        )
        _check(isinstance(self.slop, bool), "slop must be true or false")
        try:
            check_total([r.pattern for r in self.rules if r.pattern is not None])
        except ValueError as e:
            raise ValueError(f"bans: {e}") from None

    @property
    def active(self) -> bool:
        return bool(self.rules or self.no_repeat_words or self.slop)

    def joined(self, other: Bans) -> Bans:
        """These bans (a default list) and `other`'s (a story's, a command line's): the
        rules of both (the first MAX_RULES, the default list's first), `other`'s
        repetition guard where it sets one, the slop list if either asks for it."""
        rules = self.rules + tuple(r for r in other.rules if r not in self.rules)
        steps, kept = 0, []
        for rule in rules[:MAX_RULES]:
            steps += rule.pattern.steps if rule.pattern is not None else 0
            if rule.pattern is None or steps <= MAX_LIST_STEPS:
                kept.append(rule)
        repeat = other.no_repeat_words or self.no_repeat_words
        return Bans(tuple(kept), repeat, self.slop or other.slop)

    def compiled(self) -> _Compiled:
        """The phrases compiled, once per `Bans` (a search compiles none anew)."""
        if self._compiled is None:
            object.__setattr__(self, "_compiled", _Compiled(self))  # frozen: set once
        return self._compiled

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": [_rule_dict(r) for r in self.rules],
            "no_repeat_words": self.no_repeat_words,
            "slop": self.slop,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Bans:
        """Read the JSON form back (fields left out take their defaults).

        Raises:
            ValueError: one line naming the first bad field ("bans: rules[2].text ...").
        """
        _check(isinstance(data, dict), "bans must be an object")
        unknown = sorted(str(k) for k in data if k not in ("rules", "no_repeat_words", "slop"))
        _check(not unknown, f"unknown field {unknown[0]}" if unknown else "")
        rules = data.get("rules", [])
        _check(isinstance(rules, list), "rules must be a list")
        _check(len(rules) <= MAX_RULES, f"a list holds at most {MAX_RULES:,} phrases")
        return cls(
            tuple(_rule_from(r, f"rules[{i}]") for i, r in enumerate(rules)),
            data.get("no_repeat_words", 0),
            data.get("slop", False),
        )


def bans_from_config(table: Mapping[str, Any]) -> Bans:
    """config.toml's [bans]: `phrases` and `regexes` (lists of text), `no_repeat_words`,
    `slop`; a default list every search uses beside the story's own.

    Raises:
        ValueError: one line naming the key or the entry.
    """
    unknown = sorted(set(table) - {"phrases", "regexes", "no_repeat_words", "slop"})
    _check(not unknown, f"unknown key {unknown[0]!r}" if unknown else "")
    rules = []
    for name, regex in (("phrases", False), ("regexes", True)):
        values = table.get(name, [])
        _check(isinstance(values, list), f"{name} must be a list of text")
        _check(len(values) <= MAX_RULES, f"a list holds at most {MAX_RULES:,} phrases")
        rules += [_rule(dict(text=v, regex=regex), f"{name}[{i}]") for i, v in enumerate(values)]
    return Bans(tuple(rules), table.get("no_repeat_words", 0), table.get("slop", False))


@dataclass(frozen=True)
class SavedBans:
    """A story's saved bans as they can run: `left_out` says, one line each, which saved
    patterns cannot (valid in Python's `re`, saved before patterns ran on RE2: a
    lookbehind, a backreference)."""

    bans: Bans
    left_out: tuple[str, ...] = ()


def bans_in(settings: Mapping[str, Any]) -> SavedBans:
    """The bans a story's settings record keeps (none where it keeps none), less the
    patterns that cannot run, each named in `left_out`.

    Raises:
        ValueError: one line naming the first bad field otherwise.
    """
    data = settings.get(SETTINGS_KEY)
    if data is None:
        return SavedBans(Bans())
    rules, left_out = data.get("rules") if isinstance(data, dict) else None, []
    if isinstance(rules, list):
        runnable = []
        for i, rule in enumerate(rules):
            text = rule.get("text") if isinstance(rule, dict) else None
            if isinstance(text, str) and rule.get("regex") is True and _ran_before(text):
                try:
                    compile_pattern(text)
                except ValueError as e:
                    left_out.append(f"rules[{i}] ({text!r}) {e}")
                    continue
            runnable.append(rule)
        data = {**data, "rules": runnable}
    return SavedBans(Bans.from_dict(data), tuple(left_out))


def with_bans(settings: Mapping[str, Any], bans: Bans) -> dict[str, Any]:
    """The settings record keeping `bans` (none written for the default)."""
    kept = {k: v for k, v in settings.items() if k != SETTINGS_KEY}
    return kept if bans == Bans() else {**kept, SETTINGS_KEY: bans.to_dict()}


def parse_list(data: bytes | str) -> tuple[BanRule, ...]:
    """A list file's rules: a JSON list (of phrases, banned, or `[phrase, weight]` pairs,
    weight null for a ban) or plain text, one banned phrase per line (blank lines and
    lines starting with '#' skipped).

    Raises:
        ValueError: one line naming the entry (its line, or its place in the list).
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"bans: not UTF-8 text (byte {e.start})") from e
    if data.lstrip().startswith("["):
        try:
            items = json.loads(data)
        except (json.JSONDecodeError, RecursionError) as e:
            raise ValueError(f"bans: not a JSON list ({e})") from e
        _check(isinstance(items, list), "a JSON list of [phrase, weight] pairs")
        _check(len(items) <= MAX_RULES, f"a list holds at most {MAX_RULES:,} phrases")
        return tuple(_pair(item, f"entry {i + 1}") for i, item in enumerate(items))
    lines = [(n, line.rstrip("\r")) for n, line in enumerate(data.split("\n"), 1)]
    lines = [(n, line) for n, line in lines if line.strip() and not line.startswith("#")]
    _check(len(lines) <= MAX_RULES, f"a list holds at most {MAX_RULES:,} phrases")
    return tuple(_rule(dict(text=line), f"line {n}") for n, line in lines)


@cache
def slop_rules() -> tuple[BanRule, ...]:
    """The shipped slop list (weave/story/data/slop.txt), banned."""
    return parse_list(SLOP_FILE.read_bytes())


# -- the phrases compiled, once per list ------------------------------------------------
class _Compiled:
    """A `Bans`' phrases compiled: banned (literal and regular expressions, by name); the
    biased rules, and their spellings per model once made (`weave.story.bias.spelled`)."""

    def __init__(self, bans: Bans) -> None:
        rules = bans.rules + (slop_rules() if bans.slop else ())
        literal = [r for r in rules if r.banned and not r.regex]
        regexes = [r for r in rules if r.banned and r.regex]
        self.banned = PhraseSet([_phrase(r) for r in literal], [r.pattern for r in regexes])
        self.ban_names = [r.text for r in literal + regexes]
        self.biased = tuple(r for r in rules if not r.banned)
        self.spelled: dict[tuple, Any] = {}  # (backend, model, url) -> its `TokenBias`


def _phrase(rule: BanRule) -> Phrase:
    return Phrase(rule.text, rule.case_sensitive, rule.whole_words)


def _ran_before(pattern: str) -> bool:
    """Whether `pattern` compiles in Python's `re`, as patterns were run before RE2 (one
    that never did is refused as any bad entry is)."""
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


# -- checks: each failure is one ValueError naming the entry --------------------------------
def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"bans: {message}")


def _check_rule(rule: BanRule, where: str) -> Pattern | None:
    """Raises ValueError naming what is wrong with `rule`; its pattern compiled, if one."""
    text = rule.text
    _check(isinstance(text, str), f"{where} must be text")
    _check(text.strip() != "", f"{where} is empty")
    _check(len(text) <= MAX_RULE_CHARS, f"{where} holds at most {MAX_RULE_CHARS} characters")
    control = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    _check(control is None, f"{where} ({text[:40]!r}) holds a control character {control!r}")
    if rule.weight is not None:
        w = rule.weight
        ok = isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w)
        span = f"-{MAX_WEIGHT:g}..{MAX_WEIGHT:g}"
        _check(ok and abs(w) <= MAX_WEIGHT, f"{where}: weight must be a number in {span}")
        _check(not rule.regex, f"{where}: a regular expression is banned, not biased")
    for name in ("regex", "case_sensitive", "whole_words"):
        _check(isinstance(getattr(rule, name), bool), f"{where}.{name} must be true or false")
    if not rule.regex:
        return None
    try:
        return compile_pattern(text)
    except ValueError as e:
        raise ValueError(f"bans: {where} ({text!r}) {e}") from None


def _rule(values: dict[str, Any], where: str) -> BanRule:
    try:
        return BanRule(**values)
    except ValueError as e:
        raise ValueError(str(e).replace("bans: rule", f"bans: {where}", 1)) from e


def _pair(item: Any, where: str) -> BanRule:
    if isinstance(item, str):
        return _rule(dict(text=item), where)
    _check(
        isinstance(item, list) and len(item) == 2 and isinstance(item[0], str),
        f"{where} must be a phrase or a [phrase, weight] pair",
    )
    return _rule(dict(text=item[0], weight=item[1]), where)


_RULE_FIELDS = ("text", "weight", "regex", "case_sensitive", "whole_words")


def _rule_dict(rule: BanRule) -> dict[str, Any]:
    return {name: getattr(rule, name) for name in _RULE_FIELDS}


def _rule_from(data: Any, where: str) -> BanRule:
    _check(isinstance(data, dict), f"{where} must be an object")
    unknown = sorted(str(k) for k in data if k not in _RULE_FIELDS)
    _check(not unknown, f"unknown field {where}.{unknown[0]}" if unknown else "")
    _check("text" in data, f"{where} needs text")
    return _rule(dict(data), where)
