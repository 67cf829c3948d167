"""What a writer reads in a list of suggestions, measured against what an author wrote next.

No benchmark by itself: the figures `bench_authors.py` prints, one function each, over
the rows a list shows (best first) and the words the author wrote after the story.
Words are compared as a writer reads them: split at whitespace, the punctuation around
them dropped, case ignored ("Bow," is "bow").

    from bench.authors import Figures, figures, load_passages
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SHARED_TEXTS = Path(__file__).resolve().parents[2] / "shared" / "texts"
PASSAGES_FILE = SHARED_TEXTS / "authors-next-words.json"
FIRST_ROWS = 10  # a laptop's screenful: the rows a writer reads first
OPENING_WORDS = 3
STUB_WORDS = 2
TOP = 5
FEW = 5
PUNCTUATION = "\"'.,;:!?()[]{}-—–_*‘’“”«»…"


@dataclass(frozen=True)
class Passage:
    source: str
    story: str
    author_next: str


def load_passages(path: Path = PASSAGES_FILE) -> list[Passage]:
    """The shared passages (others' writing: read at run time, never kept in the repo)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise SystemExit(f"no passages at {path}: pass --texts PATH") from e
    return [Passage(p["source"], p["story"], p["author_next"]) for p in data]


def words(text: str) -> list[str]:
    """`text`'s words as compared: punctuation around each dropped, case folded; a word
    of punctuation alone is none."""
    out = (w.strip(PUNCTUATION).casefold() for w in text.split())
    return [w for w in out if w]


def opens_with(row: str, wanted: Sequence[str]) -> bool:
    """Whether `row`'s first words are `wanted`."""
    return bool(wanted) and words(row)[: len(wanted)] == list(wanted)


def near_duplicates(rows: Sequence[str]) -> int:
    """Rows that repeat an earlier row but for whitespace or their final punctuation."""
    seen, repeats = set(), 0
    for row in rows:
        key = " ".join(row.split()).rstrip(PUNCTUATION + " ").casefold()
        repeats += key in seen
        seen.add(key)
    return repeats


def punctuation_only(row: str) -> bool:
    return not any(ch.isalnum() for ch in row)


@dataclass(frozen=True)
class Figures:
    """One list's figures against one passage."""

    rows: int
    first_word: bool  # the author's next word opens some row
    two_words: bool  # the author's next two words open some row
    two_words_first: bool  # ... one of the first ten
    openings: int  # distinct first three words among the first ten rows
    near_duplicates: int  # among the first ten rows
    punctuation_only: int  # rows with no letter or digit
    median_words: float
    stubs_top: float  # share of the top five with two words or fewer
    tokens: int  # model tokens spent


def figures(rows: Sequence[str], author_next: str, tokens: int) -> Figures:
    wanted = words(author_next)
    first = rows[:FIRST_ROWS]
    counts = [len(words(row)) for row in rows] or [0]
    top = rows[:TOP]
    return Figures(
        rows=len(rows),
        first_word=any(opens_with(row, wanted[:1]) for row in rows),
        two_words=any(opens_with(row, wanted[:2]) for row in rows),
        two_words_first=any(opens_with(row, wanted[:2]) for row in first),
        openings=len({tuple(words(row)[:OPENING_WORDS]) for row in first}),
        near_duplicates=near_duplicates(first),
        punctuation_only=sum(punctuation_only(row) for row in rows),
        median_words=statistics.median(counts),
        stubs_top=sum(len(words(r)) <= STUB_WORDS for r in top) / len(top) if top else 0.0,
        tokens=tokens,
    )


@dataclass(frozen=True)
class Summary:
    """A side's figures over the passages, as the issue's table reads them."""

    first_word: float
    two_words: float
    two_words_first: float
    openings: float
    near_duplicates: float
    punctuation_only: int  # passages with a punctuation-only row
    few: float  # share of passages with fewer than five rows
    median_words: float
    stubs_top: float
    median_tokens: float

    @classmethod
    def of(cls, each: Sequence[Figures]) -> Summary:
        n = len(each)
        return cls(
            first_word=sum(f.first_word for f in each) / n,
            two_words=sum(f.two_words for f in each) / n,
            two_words_first=sum(f.two_words_first for f in each) / n,
            openings=statistics.fmean(f.openings for f in each),
            near_duplicates=statistics.fmean(f.near_duplicates for f in each),
            punctuation_only=sum(f.punctuation_only > 0 for f in each),
            few=sum(f.rows < FEW for f in each) / n,
            median_words=statistics.median(f.median_words for f in each),
            stubs_top=statistics.fmean(f.stubs_top for f in each),
            median_tokens=statistics.median(f.tokens for f in each),
        )
