"""Lorebook matching: which entries fire on a 100 KB story, per search, old rules vs one pass.

The story is bench/long_story.txt repeated to 100,000 characters (prose). Keys are
phrases of one to three of its words (so that many fire) and, for the largest lorebook,
strings of its words in random order cut at 200 characters (they begin like the story's
words at every turn, the hard case for a one-pass anchor, yet rarely occur whole).
Cases, from issue 31 item 8:
  issue      1,000 entries x 3 keys, default scan (2,000 characters);
  deep       1,000 entries x 3 keys, each scanning 100,000 characters;
  largest    the largest lorebook the caps allow: 1,000 entries x (100 + 100 secondary)
             keys of 200 characters, each scanning 100,000 characters.
Printed per case, side by side:
  old        the rules before: one regular-expression search per key (for `largest`,
             measured on 10 entries and scaled by 100: the whole would take minutes);
  one pass   `Steering.fired` (weave.story.lore_keys): median of REPEATS searches, and its
             compile time once per lorebook change;
  AC pass    the same phrases read by the pure-Python Aho-Corasick automaton that reads
             beams piece by piece (`PhraseSet.advance` over the whole scanned text): why
             the one pass is a trie-shaped regular expression instead.

    .venv/bin/python bench/bench_lorebook.py
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from weave.story.phrases import Phrase, PhraseSet  # noqa: E402
from weave.story.steering import MAX_KEY_CHARS, MAX_KEYS, MAX_SCAN_CHARS, LoreEntry, Steering  # noqa: E402

REPEATS = 5
STORY_CHARS = 100_000


def old_fires(entry: LoreEntry, story: str) -> bool:
    """`LoreEntry.fires` before the one pass: each key its own regular expression."""
    flags = 0 if entry.case_sensitive else re.IGNORECASE
    start = max(0, len(story) - entry.scan_chars)

    def pattern(key: str) -> str:
        p = re.escape(key)
        return (
            ("(?<!\\w)" if re.match(r"\w", key[0]) else "")
            + p
            + ("(?!\\w)" if re.match(r"\w", key[-1]) else "")
        )

    def there(keys: tuple[str, ...]) -> list[bool]:
        return [re.compile(pattern(k), flags).search(story, start) is not None for k in keys]

    if not any(there(entry.keys)):
        return False
    seen = there(entry.secondary_keys)  # the lorebooks here use and_any or not_any
    return not seen or (not any(seen) if entry.logic == "not_any" else any(seen))


def lorebooks(words: list[str], rng: random.Random) -> dict[str, tuple[LoreEntry, ...]]:
    def short() -> str:
        at = rng.randrange(len(words) - 3)
        return " ".join(words[at : at + rng.randint(1, 3)])

    def long() -> str:
        return " ".join(rng.choice(words) for _ in range(60))[:MAX_KEY_CHARS].strip()

    three = [tuple(short() for _ in range(3)) for _ in range(1_000)]
    return {
        "issue": tuple(LoreEntry(keys, "lore") for keys in three),
        "deep": tuple(LoreEntry(keys, "lore", scan_chars=MAX_SCAN_CHARS) for keys in three),
        "largest": tuple(
            LoreEntry(
                (short(), *(long() for _ in range(MAX_KEYS - 1))),
                "lore",
                scan_chars=MAX_SCAN_CHARS,
                secondary_keys=tuple(long() for _ in range(MAX_KEYS)),
                logic="not_any",
            )
            for _ in range(1_000)
        ),
    }


def timed(run) -> tuple[float, object]:
    started = time.perf_counter()
    out = run()
    return time.perf_counter() - started, out


def main() -> None:
    prose = (ROOT / "bench" / "long_story.txt").read_text()
    story = (prose * (STORY_CHARS // len(prose) + 1))[:STORY_CHARS]
    words = re.findall(r"[A-Za-z']+", prose)
    rng = random.Random(5)
    print(f"story: {len(story):,} characters; times in ms")
    print(f"{'case':8} {'keys':>7} {'fired':>5} {'old':>10} {'one pass':>9} {'compile':>8} "
          f"{'AC pass':>8} {'old/one':>8}")  # fmt: skip
    for name, lore in lorebooks(words, rng).items():
        keys = sum(len(e.keys) + len(e.secondary_keys) for e in lore)
        sample = lore if name != "largest" else lore[:10]
        old_s, old_fired = timed(lambda s=sample: [e for e in s if old_fires(e, story)])
        old_s *= len(lore) / len(sample)
        steering = Steering(lore=lore)
        compile_s, _ = timed(lambda st=steering: st.fired(""))
        runs = [timed(lambda st=steering: st.fired(story)) for _ in range(REPEATS)]
        one_s = statistics.median(s for s, _ in runs)
        fired = runs[0][1]
        assert [e for e in fired if e in sample] == old_fired, "the one pass disagrees"
        ac = ac_pass(lore, story)
        print(f"{name:8} {keys:>7,} {len(fired):>5} {old_s * 1e3:>10,.0f} {one_s * 1e3:>9.1f} "
              f"{compile_s * 1e3:>8,.0f} {ac:>8} {old_s / one_s:>7,.0f}x")  # fmt: skip


def ac_pass(lore: tuple[LoreEntry, ...], story: str) -> str:
    """The automaton's pass over the scanned text, in ms; not built for the largest
    lorebook (an automaton of 40 million characters' nodes in Python objects)."""
    keys = [k for e in lore for k in (*e.keys, *e.secondary_keys)]
    if len(keys) > 10_000:
        return "-"
    phrases = PhraseSet([Phrase(k) for k in keys])
    phrases.begin("")  # the automaton, built once
    reach = story[-max(e.scan_chars for e in lore) :]
    seconds, _ = timed(lambda: phrases.advance(phrases.begin(""), reach))
    return f"{seconds * 1e3:.1f}"


if __name__ == "__main__":
    main()
