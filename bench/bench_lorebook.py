"""Lorebook matching: which entries fire on a 100 KB story, per search: the rules of
old, the one pass before (a trie-shaped regular expression) and now (C automata).

The story is bench/long_story.txt repeated to 100,000 characters (prose). Keys are
phrases of one to three of its words (so that many fire) and, for the largest lorebook,
strings of its words in random order cut at 200 characters (they begin like the story's
words at every turn, the hard case for a one-pass anchor, yet rarely occur whole).
Cases, from issue 31 item 8:
  issue      1,000 entries x 3 keys, default scan (2,000 characters);
  deep       1,000 entries x 3 keys, each scanning 100,000 characters;
  largest    the largest lorebook the caps allow: 1,000 entries x (100 + 100 secondary)
             keys of 200 characters, each scanning 100,000 characters.
Printed per case, side by side, in ms:
  old        the rules of old: one regular-expression search per key (for `largest`,
             measured on 10 entries and scaled by 100: the whole would take minutes);
  before     the one pass as it was at commit BEFORE (weave/story/phrases.py and
             lore_keys.py read from git): median of REPEATS searches, and its compile
             time once per lorebook change;
  now        `Steering.fired` (weave.story.lore_keys): the same, side by side;
  RSS        the process's resident memory grown by compiling it now (MB).

    .venv/bin/python bench/bench_lorebook.py
"""

from __future__ import annotations

import random
import re
import resource
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from weave.story.steering import MAX_KEY_CHARS, MAX_KEYS, MAX_SCAN_CHARS, LoreEntry, Steering  # noqa: E402

REPEATS = 5
BEFORE = "892ab33"  # the last commit with the regular-expression one pass
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


def module_at(commit: str, path: str, name: str, **replacing: types.ModuleType):
    """The module `path` as it was at `commit`, its imports of `replacing`'s modules
    (by their dotted names, dots written as `__`) reading those instead."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    swapped = {k.replace("__", "."): m for k, m in replacing.items()}
    saved = {k: sys.modules[k] for k in swapped}
    sys.modules.update(swapped)
    try:
        exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)
    finally:
        sys.modules.update(saved)
    return module


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def timed(run) -> tuple[float, object]:
    started = time.perf_counter()
    out = run()
    return time.perf_counter() - started, out


def main() -> None:
    prose = (ROOT / "bench" / "long_story.txt").read_text()
    story = (prose * (STORY_CHARS // len(prose) + 1))[:STORY_CHARS]
    words = re.findall(r"[A-Za-z']+", prose)
    rng = random.Random(5)
    old_phrases = module_at(BEFORE, "weave/story/phrases.py", "before_phrases")
    before = module_at(BEFORE, "weave/story/lore_keys.py", "before_lore_keys",
                       weave__story__phrases=old_phrases)  # fmt: skip
    print(f"story: {len(story):,} characters; times in ms; before = commit {BEFORE}")
    print(f"{'case':8} {'keys':>7} {'fired':>5} {'old':>10} {'before':>8} {'now':>6} "
          f"{'before/now':>10} {'compile before':>14} {'now':>6} {'RSS MB':>6}")  # fmt: skip
    for name, lore in lorebooks(words, rng).items():
        keys = sum(len(e.keys) + len(e.secondary_keys) for e in lore)
        sample = lore if name != "largest" else lore[:10]
        old_s, old_fired = timed(lambda s=sample: [e for e in s if old_fires(e, story)])
        old_s *= len(lore) / len(sample)
        compile_before, compiled_before = timed(lambda lo=lore: before.LoreKeys(lo))
        grown = rss_mb()
        steering = Steering(lore=lore)
        compile_now, _ = timed(lambda st=steering: st.fired(""))
        grown = rss_mb() - grown
        runs_before = [timed(lambda cb=compiled_before: cb.fired(story)) for _ in range(REPEATS)]
        runs_now = [timed(lambda st=steering: st.fired(story)) for _ in range(REPEATS)]
        before_s = statistics.median(s for s, _ in runs_before)
        now_s = statistics.median(s for s, _ in runs_now)
        fired = runs_now[0][1]
        assert [e for e in fired if e in sample] == old_fired, "the one pass disagrees"
        assert runs_before[0][1] == fired, "before and now disagree"
        print(f"{name:8} {keys:>7,} {len(fired):>5} {old_s * 1e3:>10,.0f} {before_s * 1e3:>8.1f} "
              f"{now_s * 1e3:>6.1f} {before_s / now_s:>9.1f}x {compile_before * 1e3:>14,.0f} "
              f"{compile_now * 1e3:>6,.0f} {grown:>6.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
