"""Bans on the embedded model (MLX): what a 500-phrase and a 10,000-phrase list cost.

The passages are bench/panel.py's where it is there, else the few of `OWN` below. The
500-phrase list is the shipped slop list plus the word pairs and triples the model
offers most often on these passages without bans (so that the list bites: today's
count of banned phrases shown is far from 0); the 10,000-phrase list is those 500 and
9,500 pairs and triples of the passages' words that the model rarely offers. Each
variant has its own backend (no fragment cached from another variant's search of the
same passage), the variants taking turns per passage. Printed side by side:
  banned shown   banned phrases in the shown suggestions without bans (today) and with;
  suggestions    per search, with the list against without (goal >= 95 %);
  time           search seconds with each list against without (goals <= 1.15x for 500,
                 <= 1.3x for 10,000), the list's compile time once per story apart,
                 and the model tokens the searches evaluated (a pruned branch's room
                 goes to others, so the trees differ).
Patterns: the same 10,000 phrases written as patterns (`(?i)\\bword\\s+word\\s+word\\b`) and
the five patterns that froze Python's `re` (`CATASTROPHIC`) are two lists more, run on
RE2 (`weave.story.patterns`); before the model, one pattern step (a 200-character window,
`PhraseSet.advance`) on RE2 and on Python's `re` side by side, `re` stopped where a step
passes `RE_LIMIT` seconds (the text doubles its time every character or two).

    .venv/bin/python bench/bench_bans.py
"""

from __future__ import annotations

import multiprocessing
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends.embedded import ensure_embedded_model  # noqa: E402
from backends.mlx.backend import MLXBackend  # noqa: E402
from weave.story.bans import BanRule, Bans, slop_rules  # noqa: E402
from weave.story.guard import Guard  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.story.phrases import REGEX_WINDOW, Phrase, PhraseSet  # noqa: E402
from weave.search.beams import expand  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402
# isort: on

OWN = (
    "The old dragon opened its eyes and",
    "She had not spoken to her brother in eleven years, and when the phone rang at "
    "midnight she knew, before she answered, that",
    "The ship's engines failed on the third night. Captain Reyes gathered the crew in "
    "the mess hall and told them",
    "Nobody in the village remembered who had planted the orchard, but every autumn the "
    "apples came, and every autumn",
    "The letter was short. It said only that the house was hers now, and that she should "
    "not, under any circumstances,",
    "Detective Hale looked at the body, then at the open window, and",
)


CATASTROPHIC = (r"(\w+\s?)+$", r"(a+)+$", r"(a|aa)+$", r"(a*)*b", r"(.*a){25}")
RE_LIMIT = 2.0  # seconds: Python's `re` is stopped past this, in a process of its own


def _re_search(pattern: str, text: str, out) -> None:
    rx = re.compile(pattern)
    started = time.perf_counter()
    rx.search(text)
    out.send(time.perf_counter() - started)


def re_seconds(pattern: str, text: str) -> float | None:
    """Seconds Python's `re` takes to search `text`, timed in a process of its own; None
    past RE_LIMIT (the process is then killed)."""
    here, there = multiprocessing.Pipe(duplex=False)
    worker = multiprocessing.Process(target=_re_search, args=(pattern, text, there))
    worker.start()
    answered = here.poll(RE_LIMIT)
    seconds = here.recv() if answered else None
    worker.kill()
    worker.join()
    return seconds


def step_seconds(patterns: list[str], text: str, repeat: int = 20) -> float:
    """Seconds of one RE2 step over `text`'s last piece (its last character)."""
    ps = PhraseSet([], patterns)
    scan = ps.begin(text[:-1])
    started = time.perf_counter()
    for _ in range(repeat):
        ps.advance(scan, text[-1])
    return (time.perf_counter() - started) / repeat


def patterns_side_by_side() -> None:
    """Each catastrophic pattern on texts of growing length: RE2's step against `re`."""
    words = "She had not spoken to her brother in eleven years and when the phone rang "
    texts = {
        r"(\w+\s?)+$": lambda n: (words * 4)[-n:] + ",",
        r"(a+)+$": lambda n: "a" * n + "!",
        r"(a|aa)+$": lambda n: "a" * n + "!",
        r"(a*)*b": lambda n: "a" * n,
        r"(.*a){25}": lambda n: "a" * n,
    }
    print(f"one step per pattern, RE2 vs Python's re (None: over {RE_LIMIT:g} s, killed)")
    print(f"{'pattern':>12} {'chars':>6} {'RE2 ms':>8} {'re ms':>10}")
    for pattern, make in texts.items():
        for n in (16, 24, 32, REGEX_WINDOW):
            text = make(n)
            slow = re_seconds(pattern, text) if n <= 32 else None
            shown = "None" if slow is None else f"{slow * 1e3:.1f}"
            if n == REGEX_WINDOW and slow is None:
                shown = "(not run)"
            print(f"{pattern:>12} {n:>6} {step_seconds([pattern], text) * 1e3:>8.3f} {shown:>10}")


def passages() -> list[str]:
    try:
        from bench.panel import PASSAGES
    except ImportError:
        return list(OWN)
    return [text for _, text in PASSAGES]


def ngrams(text: str, n: int = 3) -> list[str]:
    words = re.findall(r"[a-z']+", text.lower())
    return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]


def shown_banned(phrases: PhraseSet, story: str, texts: list[str]) -> int:
    """Banned phrases in the suggestions, read after the story's end."""
    return sum(1 for t in texts for h in phrases.find(story + t) if h.end > len(story))


def main() -> None:
    patterns_side_by_side()
    path = ensure_embedded_model(load_settings().cache_dir)
    stories, params = passages(), SearchParams()
    source = "bench/panel.py" if len(stories) != len(OWN) else "bench_bans.OWN (no panel)"

    backends = {}

    def search(story: str, bans: Bans | None, variant: str):
        if variant not in backends:
            backends[variant] = MLXBackend(path, display_name="SmolLM2-135M-Instruct")
        backend = backends[variant]
        started = time.perf_counter()
        guard = Guard(bans, story) if bans is not None else None
        compiled = time.perf_counter()
        result = expand(backend, backend.tokenize(story), params, guard=guard)
        return result, compiled - started, time.perf_counter() - compiled

    plain = {story: search(story, None, "first")[0] for story in stories}
    offered = Counter(
        g for story, r in plain.items() for s in r.suggestions for g in ngrams(story + s.text)
        if g not in ngrams(story)
    )  # fmt: skip
    slop = [r.text for r in slop_rules()]
    common = [g for g, _ in offered.most_common() if g not in slop][: 500 - len(slop)]
    small = slop + common
    rng = random.Random(3)
    words = sorted({w for s in stories for w in re.findall(r"[a-z']{6,}", s.lower())})
    filler: set[str] = set()
    while len(filler) < 10_000 - len(small):
        phrase = " ".join(rng.choice(words) for _ in range(3))
        if phrase not in offered and phrase not in small:
            filler.add(phrase)
    as_pattern = [r"(?i)\b" + r"\s+".join(map(re.escape, p.split())) + r"\b" for p in small]
    as_pattern += [r"(?i)\b" + r"\s+".join(map(re.escape, p.split())) + r"\b" for p in filler]
    lists = {
        "500": Bans(tuple(BanRule(p) for p in small)),
        "10,000": Bans(tuple(BanRule(p) for p in small + sorted(filler))),
        "10k re": Bans(tuple(BanRule(p, regex=True) for p in as_pattern)),
        "5 catas": Bans(tuple(BanRule(p, regex=True) for p in CATASTROPHIC)),
    }
    matcher = PhraseSet([Phrase(p) for p in small])
    totals = {
        name: [0, 0, 0.0, 0.0, 0] for name in ("none", *lists)
    }  # shown, count, s, compile, tokens
    for story in stories:
        for name, bans in (("none", None), *lists.items()):
            result, compile_s, search_s = search(story, bans, name)
            texts = [s.text for s in result.suggestions]
            row = totals[name]
            row[0] += shown_banned(matcher, story, texts)
            row[1] += len(texts)
            row[2] += search_s
            row[3] += compile_s
            row[4] += result.stats.model_tokens
    print(f"{len(stories)} passages ({source}), SearchParams() defaults, embedded model")
    base = totals["none"]
    print(f"{'list':>8} {'banned shown':>13} {'suggestions':>12} {'vs none':>8} "
          f"{'search s':>9} {'vs none':>8} {'compile s':>10} {'tokens':>7}")  # fmt: skip
    for name, (shown, count, seconds, compiled, tokens) in totals.items():
        ratio = seconds / base[2]
        print(f"{name:>8} {shown:>13} {count:>12} {count / base[1]:>8.1%} "
              f"{seconds:>9.2f} {ratio:>7.2f}x {compiled:>10.2f} {tokens:>7}")  # fmt: skip


if __name__ == "__main__":
    main()
