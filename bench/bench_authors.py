"""Do the suggestions hold what an author wrote next? The default rule beside LLooM v0.3's
and beside sampling, on real authors' prose.

For each passage of `../shared/texts/authors-next-words.json` (public-domain novels cut
mid-sentence: read at run time, never kept in the repo), on the real MLX backend (the
embedded SmolLM2-135M), side by side in one run:
  default   a search with the model's default settings (`config.toml`)
  v0.3      LLooM v0.3's rule at its defaults (`--rule v03`: cutoff 0.2, multiplier 1,
            split limit 3)
  before    the rule of LLooM before the relative cutoff, as it ran on this model
            (v0.3's rule at cutoff 0.1)
  sample    what other looms do: samples drawn at temperature 1 (and at min-p 0.1), each
            read up to where the default search would end its beam, drawn until they
            spent the default search's model tokens; listed in the order drawn, those
            reading the same once
Figures (`bench.authors`): the author's next word opening some row; the next two words
opening some row, and one of the first ten; distinct openings (first three words) among
the first ten rows; near-duplicate rows among them; passages with a punctuation-only
row; passages with fewer than five rows; the median row's words; the share of stubs
(two words or fewer) in the top five; the median model tokens a search spent. The
model's own ceiling: its top 25 next tokens hold the author's next word as a whole
token. Healing: with half of the author's next word typed, some row completes it as the
author wrote it. The panel (`bench.panel`, our own 24 passages, no author's words)
gives the figures that need none.

    .venv/bin/python bench/bench_authors.py [--texts FILE] [--each]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends import create_backend  # noqa: E402
from backends.base import Backend  # noqa: E402
from bench.authors import (  # noqa: E402
    PASSAGES_FILE, Passage, Summary, figures, load_passages, words,
)  # fmt: skip
from bench.panel import PASSAGES as PANEL  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.beams import expand, stop_cut  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402
from weave.search.ramify import MAX_SAMPLES, RamifyParams, ramify  # noqa: E402
from weave.search.tree import without_prefix_space  # noqa: E402
# isort: on

CEILING_K = 25
BEFORE = {"cutoff": 0.1}  # LLooM's own setting for this model before the relative rule


@dataclass(frozen=True)
class Listing:
    """What one side showed for one story: its rows, best first, and its model tokens."""

    rows: list[str]
    tokens: int


Side = Callable[[Backend, list[int], int], Listing]  # (backend, ids, token budget)


def searched(params: SearchParams) -> Side:
    def side(backend: Backend, ids: list[int], _budget: int) -> Listing:
        result = expand(backend, ids, params)
        return Listing([s.text for s in result.suggestions], result.stats.model_tokens)

    return side


def sampled(params: SearchParams, min_p: float) -> Side:
    """Samples drawn until they spent `budget` tokens, each cut where the search would
    end its beam (and credited only those tokens)."""

    def side(backend: Backend, ids: list[int], budget: int) -> Listing:
        draw = RamifyParams(n=MAX_SAMPLES, temperature=1.0, min_p=min_p,
                            max_tokens=params.max_depth)  # fmt: skip
        rows, seen, spent, seed = [], set(), 0, 0
        while spent < budget:
            for sample in ramify(backend, ids, replace(draw, seed=seed)).samples:
                text, tokens = _cut(backend, sample.text, len(sample.token_ids), params)
                spent += max(tokens, 1)
                key = without_prefix_space(text)
                if text and key not in seen:
                    seen.add(key)
                    rows.append(text)
                if spent >= budget:
                    break
            seed += 1
        return Listing(rows, spent)

    return side


def _cut(backend: Backend, text: str, tokens: int, params: SearchParams) -> tuple[str, int]:
    """A sample's text and tokens up to where auto-stop would end a beam (its tokens
    estimated by the share of text kept: a sample's tokens are not all re-read)."""
    cut = stop_cut(text) if params.auto_stop else None
    if cut is None:
        return text, tokens
    kept = text[:cut]
    return kept, max(1, math.ceil(tokens * len(kept) / max(len(text), 1)))


def ceiling(backend: Backend, ids: list[int], author_next: str) -> bool:
    """Whether the model's top 25 next tokens hold the author's next word whole."""
    wanted = words(author_next)[:1]
    top = backend.top_logprobs([ids], CEILING_K)[0]
    return any(words(c.piece.decode("utf-8", "replace")) == wanted for c in top)


def healing_completes(backend: Backend, params: SearchParams, passage: Passage) -> bool | None:
    """With the first half of the author's next word typed, whether some row completes
    it as the author wrote it (None: a word too short to halve)."""
    word = passage.author_next.split()[0]
    letters = len(word.rstrip(".,;:!?\"'"))
    if letters < 2:
        return None
    typed = word[: (letters + 1) // 2]
    story = passage.story + " " + typed
    rows = [s.text for s in expand(backend, backend.tokenize(story), params).suggestions]
    return any(words(typed + row)[:1] == words(word) for row in rows)


def table(names: Sequence[str], summaries: Sequence[Summary], authors: bool) -> None:
    print(f"{'figure':<44}" + "".join(f"{n:>12}" for n in names))
    rows = [
        ("author's next word opens a row", "first_word", "{:.0%}", True),
        ("next two words open a row", "two_words", "{:.0%}", True),
        ("... one of the first ten", "two_words_first", "{:.0%}", True),
        ("distinct openings in the first ten", "openings", "{:.1f}", False),
        ("near-duplicate rows in the first ten", "near_duplicates", "{:.2f}", False),
        ("passages with a punctuation-only row", "punctuation_only", "{}", False),
        ("passages with fewer than 5 rows", "few", "{:.0%}", False),
        ("median row's words", "median_words", "{:.1f}", False),
        ("stubs (<= 2 words) in the top five", "stubs_top", "{:.0%}", False),
        ("model tokens per search (median)", "median_tokens", "{:.0f}", False),
    ]
    for label, name, form, needs_author in rows:
        if needs_author and not authors:
            continue
        cells = "".join(f"{form.format(getattr(s, name)):>12}" for s in summaries)
        print(f"{label:<44}{cells}")


def run_side(settings, side: Side, stories: Sequence[str], budgets: Sequence[int]) -> list[Listing]:
    """One side over every story, on a backend of its own: a search's model tokens are then
    its own, none read from a cache another side filled."""
    backend = create_backend(settings, env={})
    try:
        return [side(backend, backend.tokenize(story), budget)
                for story, budget in zip(stories, budgets, strict=True)]  # fmt: skip
    finally:
        backend.close()


def main() -> None:
    ask = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ask.add_argument("--texts", type=Path, default=PASSAGES_FILE)
    ask.add_argument("--each", action="store_true", help="print each passage's first rows")
    args = ask.parse_args()
    passages = load_passages(args.texts)
    settings = load_settings(env={"LLOOM_BACKEND": "mlx"})
    backend = create_backend(settings, env={})
    default = settings.search_for(backend.model_name)
    stories = [p.story for p in passages]
    print(f"{backend.model_name}; default {default}; {len(passages)} passages")
    held = sum(ceiling(backend, backend.tokenize(p.story), p.author_next) for p in passages)
    healed = [healing_completes(backend, default, p) for p in passages]
    backend.close()
    listed = {"default": run_side(settings, searched(default), stories, [0] * len(stories))}
    budgets = [listing.tokens for listing in listed["default"]]  # the samples spend these
    sides: dict[str, Side] = {
        "v0.3": searched(default.under("v03")),
        "before": searched(replace(default.under("v03"), **BEFORE)),
        "sample": sampled(default, 0.0),
        "min-p 0.1": sampled(default, 0.1),
    }
    for name, side in sides.items():
        listed[name] = run_side(settings, side, stories, budgets)
    each = {name: [figures(listing.rows, p.author_next, listing.tokens)
                   for listing, p in zip(listings, passages, strict=True)]
            for name, listings in listed.items()}  # fmt: skip
    if args.each:
        for listing, p in zip(listed["default"], passages, strict=True):
            print(f"\n{p.story[-60:]!r} -> {p.author_next[:30]!r}")
            for row in listing.rows[:10]:
                print(f"    {row!r}")
    print()
    table(list(each), [Summary.of(f) for f in each.values()], authors=True)
    halved = [h for h in healed if h is not None]
    print(f"\nthe model's own top {CEILING_K} next tokens hold the author's next word: "
          f"{held / len(passages):.0%} ({held} of {len(passages)})")  # fmt: skip
    print(f"healing, half the author's next word typed: completed as written in "
          f"{sum(halved)} of {len(halved)} ({sum(halved) / len(halved):.0%})")  # fmt: skip
    for group in sorted({p.source.split(" (")[0] for p in passages}):
        mine = [f for f, p in zip(each["default"], passages, strict=True)
                if p.source.startswith(group)]  # fmt: skip
        summary = Summary.of(mine)
        print(f"  default on {group} ({len(mine)}): next word {summary.first_word:.0%}, "
              f"two words {summary.two_words:.0%}, openings {summary.openings:.1f}")  # fmt: skip
    panel_stories = [text for _genre, text in PANEL]
    zeros = [0] * len(panel_stories)
    panel = {name: [figures(listing.rows, "", listing.tokens)
                    for listing in run_side(settings, searched(params), panel_stories, zeros)]
             for name, params in (("default", default), ("v0.3", default.under("v03")),
                                  ("before", replace(default.under("v03"), **BEFORE)))}  # fmt: skip
    print(f"\nthe panel ({len(PANEL)} passages of our own)")
    table(list(panel), [Summary.of(f) for f in panel.values()], authors=False)


if __name__ == "__main__":
    main()
