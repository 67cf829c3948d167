"""A writer's regular expressions, run on RE2: time linear in the text, whatever the pattern.

Python's `re` backtracks: `(a+)+$` took 1.5 s on 24 characters and doubles with each
one more, `(\\w+\\s?)+$` and `(.*a){25}` alike, all the while holding the GIL, so one
writer's pattern froze the page server for every writer (bench/bench_bans.py). RE2 (the
google-re2 binding) matches with automata, in time linear in the text and in memory
bounded by the compiled program, which is why a pattern is compiled once
(`compile_pattern`) and many are asked together (`Patterns`).

The syntax is Python's, translated where RE2 spells it otherwise: `\\Z` (RE2's `\\z`),
`\\uXXXX`, `\\UXXXXXXXX`, `\\N{NAME}` and octal escapes (`\\x{...}`), `{,n}` (`{0,n}`), a
`[` inside a set (a literal, never a POSIX class) and `(?#...)` comments. RE2's `\\pL`,
`\\p{Greek}` and `[[:alpha:]]` work too. What RE2 cannot do is refused by name: lookahead,
lookbehind, backreferences, conditionals, atomic groups, possessive quantifiers and verbose
mode. Differences that stay (RE2's): `\\w`, `\\d`, `\\s` and `\\b` know ASCII only (write
`\\pL` for a letter of any script: Unicode classes cost some 1,300 steps each, which is why
they are not the default), and `$` is the text's end only, not also before a final newline.
A pattern compiles to at most `MAX_STEPS` program steps, a list to at most `MAX_LIST_STEPS`
(`check_total`), so that a 10,000-pattern list stays within tens of MiB.

This module knows nothing of bans or searches.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import re2

MAX_STEPS = 10_000  # one pattern's compiled program (`a{1000}` is 1,000; `\pL` 1,300)
MAX_LIST_STEPS = 1_000_000  # a list's, all patterns together (some 12 MiB)
SET_STEPS = 200_000  # patterns asked together in one RE2 set, at most this many steps
SET_MEMORY = 64 << 20  # what one such set may use (its program and its DFA)

# Constructs RE2 has not, found where they open: what each one is called.
_REFUSED = {
    "(?=": "a lookahead (?=…)",
    "(?!": "a negative lookahead (?!…)",
    "(?<=": "a lookbehind (?<=…)",
    "(?<!": "a negative lookbehind (?<!…)",
    "(?P=": "a backreference (?P=name)",
    "(?(": "a conditional (?(…)",
    "(?>": "an atomic group (?>…)",
}
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an error is raised, not written to stderr


@dataclass(frozen=True)
class Pattern:
    """A writer's pattern compiled: `text` as written, `steps` its program's size."""

    text: str
    rx: Any  # what re2.compile returns
    steps: int


def compile_pattern(text: str) -> Pattern:
    """`text` (Python's syntax, see the module docstring) compiled for RE2.

    Raises:
        ValueError: one line saying what cannot be run ("uses a lookbehind (?<=…), which
            patterns cannot: they run in time linear in the text"), without the pattern.
    """
    translated = _translate(text)
    try:
        rx = re2.compile(translated, _OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else "unknown"
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise ValueError(f"is not a valid regular expression: {reason}") from None
    steps = rx.programsize
    if steps > MAX_STEPS:
        raise ValueError(f"compiles to {steps:,} steps, over {MAX_STEPS:,}: fewer repeats")
    if rx.fullmatch("") is not None:
        raise ValueError("matches empty text: it would ban all")
    return Pattern(text, rx, steps)


def check_total(patterns: Sequence[Pattern]) -> None:
    """Raises ValueError where `patterns` together compile to over MAX_LIST_STEPS."""
    total = sum(p.steps for p in patterns)
    if total > MAX_LIST_STEPS:
        raise ValueError(
            f"the patterns together compile to {total:,} steps, over {MAX_LIST_STEPS:,}"
        )


class Patterns:
    """Many patterns asked together: which of them match a text with a match that ends
    past a point. RE2 sets (of at most SET_STEPS steps each) say in one pass over the text
    which patterns match anywhere in it; only those are searched one by one for where
    their matches end. A set that runs out of memory says so by leaving out a pattern
    that matches everywhere (RE2's binding says nothing else); its patterns are then
    searched one by one, still in linear time, as are those of a set RE2 could not
    compile within its memory."""

    def __init__(self, patterns: Sequence[Pattern]) -> None:
        self.patterns = tuple(patterns)
        self._sets: list[tuple[re2.Set | None, list[int]]] = []
        chunk: list[int] = []
        steps = 0
        for i, p in enumerate(self.patterns):
            if chunk and steps + p.steps > SET_STEPS:
                self._sets.append(_set(self.patterns, chunk))
                chunk, steps = [], 0
            chunk.append(i)
            steps += p.steps
        if chunk:
            self._sets.append(_set(self.patterns, chunk))

    def __len__(self) -> int:
        return len(self.patterns)

    def ending_after(self, text: str, lo: int, cut: int) -> list[int]:
        """The patterns (by index) with a match in `text[lo:]` (as `finditer` finds them
        from `lo`, `text` before it read as context) that ends past `cut`."""
        window = text[max(0, lo - 1) :]  # a character of context: `\b` at `lo` seen alike
        found = []
        for rset, members in self._sets:
            hits = rset.Match(window) or () if rset is not None else ()
            if len(members) not in hits:  # no set, or its sentinel is missing: out of memory
                hits = range(len(members))
            for j in hits:
                if j < len(members):
                    i = members[j]
                    if any(m.end() > cut for m in self.patterns[i].rx.finditer(text, lo)):
                        found.append(i)
        return sorted(found)


def _set(patterns: Sequence[Pattern], members: list[int]) -> tuple[re2.Set | None, list[int]]:
    """An RE2 set of `members`' patterns, and last a sentinel that matches everywhere; None
    where RE2 cannot compile them together within SET_MEMORY (each is searched alone)."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = SET_MEMORY
    rset = re2.Set.SearchSet(options)
    try:
        for i in members:
            rset.Add(patterns[i].rx.pattern)
        rset.Add("")
        rset.Compile()
    except re2.error:
        return None, members
    return rset, members


# -- Python's syntax to RE2's ------------------------------------------------------------
_OPEN_MIN = re.compile(r"\{,\d*\}")  # Python's {,n}: RE2 reads it as text
_REPEAT = re.compile(r"\{(?:\d+(?:,\d*)?|,\d*)\}\Z")  # a {m,n} ending where the search stops
_CLASS_ESCAPES = {"b": r"\x08"}  # inside a set, Python's \b is a backspace
_PLAIN_ESCAPES = {"Z": r"\z"}


def _translate(text: str) -> str:
    """`text` in RE2's syntax; ValueError naming a construct RE2 has not."""
    out: list[str] = []
    i, n = 0, len(text)
    first = -1  # inside a set: where its first member is (a `]` there is a literal); else -1
    while i < n:
        c = text[i]
        if c == "\\":
            piece, i = _escape(text, i + 1, first >= 0)
            out.append(piece)
            continue
        if first >= 0:
            if c == "]" and i != first:
                first = -1
            out.append(r"\[" if c == "[" else c)
        elif c == "[":
            first = i + 2 if text.startswith("^", i + 1) else i + 1
            out.append(text[i:first])
            i = first
            continue
        elif c == "(" and text.startswith("(?", i):
            piece, i = _group(text, i)
            out.append(piece)
            continue
        elif c in "*+?}" and text.startswith("+", i + 1) and _quantifies(text, i):
            shown = "{m,n}" if c == "}" else c
            raise ValueError(f"uses a possessive quantifier {shown}+, {_WHY}")
        elif c == "{" and _OPEN_MIN.match(text, i):
            out.append("{0")
        else:
            out.append(c)
        i += 1
    return "".join(out)


_WHY = "which patterns cannot: they run in time linear in the text"


def _quantifies(text: str, i: int) -> bool:
    """Whether `text[i]` (`*`, `+`, `?`, `}`) ends a quantifier, so that a `+` after it
    makes it possessive: not a `+` after a quantifier (`a++` is refused at its first
    `+`), not a `}` that closes no `{m,n}`."""
    if text[i] == "}":
        return _REPEAT.search(text, 0, i + 1) is not None
    return i > 0 and not (text[i] == "+" and text[i - 1] in "*+?}")


def _group(text: str, i: int) -> tuple[str, int]:
    """The `(?…` opening at `i`: RE2's form and where the rest goes on."""
    for opening, name in _REFUSED.items():
        if text.startswith(opening, i):
            raise ValueError(f"uses {name}, {_WHY}")
    if text.startswith("(?#", i):  # a comment: dropped
        end = text.find(")", i)
        return "", len(text) if end < 0 else end + 1
    flags = ""
    j = i + 2
    while j < len(text) and text[j].isalpha():
        flags += text[j]
        j += 1
    if "x" in flags:
        raise ValueError(f"uses verbose mode (?x), {_WHY}")
    return "(?", i + 2


def _escape(text: str, i: int, in_set: bool) -> tuple[str, int]:
    """The escape whose `\\` ends before `i`: RE2's form and where the rest goes on."""
    if i >= len(text):
        return "\\", i  # RE2 says the pattern ends in a backslash
    c = text[i]
    table = _CLASS_ESCAPES if in_set else _PLAIN_ESCAPES
    if c in table:
        return table[c], i + 1
    if c in "uU":
        width = 4 if c == "u" else 8
        digits = text[i + 1 : i + 1 + width]
        if len(digits) == width and all(d in "0123456789abcdefABCDEF" for d in digits):
            return f"\\x{{{digits}}}", i + 1 + width
    if c == "N" and text.startswith("{", i + 1) and "}" in text[i:]:
        end = text.index("}", i)
        try:
            return f"\\x{{{ord(unicodedata.lookup(text[i + 2 : end])):x}}}", end + 1
        except KeyError:
            raise ValueError(f"names no character: \\N{{{text[i + 2 : end]}}}") from None
    if c.isdigit() and c in "01234567":
        octal = c
        while len(octal) < 3 and i + len(octal) < len(text) and text[i + len(octal)] in "01234567":
            octal += text[i + len(octal)]
        if c == "0" or len(octal) == 3 or in_set:
            return f"\\x{{{int(octal, 8):x}}}", i + len(octal)
    if c.isdigit() and not in_set:
        raise ValueError(f"uses a backreference \\{c}, {_WHY}")
    if not c.isascii():
        return c, i + 1  # Python reads an escaped non-ASCII character as itself
    return "\\" + c, i + 1
