"""Steering on the MLX backend: what an accept costs under memory and an author's note.

The story (the first paragraphs of bench/long_story.txt, its lines kept) is searched
under a memory and a lorebook entry that fires, with no note and then with a note at a
few depths; each on a fresh backend, so that the first search reads the whole context.
Then the writer accepts the top suggestion that adds no line, and the same search runs
again at the new end. Printed per case:
  first      the first search: its prefill tokens (the whole context) and time;
  accept     the search after the accept: its prefill tokens (the goal: 0 without a note;
             with a note, at most the tokens from the note to the end) and time;
  new line   the search after an accept that adds a line (the note moves down a line):
             its prefill tokens against the tokens from the note's old place to the new end;
and the note cases' times beside the no-note case's (the same search with no note).
Times are medians of REPEATS runs, each on a fresh backend, the cases taking turns.

    .venv/bin/python bench/bench_steering.py
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends.embedded import ensure_embedded_model  # noqa: E402
from backends.mlx.backend import MLXBackend  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.story.context import Context  # noqa: E402
from weave.story.model_context import fitted_context  # noqa: E402
from weave.search.beams import SearchResult, expand  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402
from weave.story.steering import LoreEntry, Steering  # noqa: E402
# isort: on

STORY = "\n".join(Path(__file__).with_name("long_story.txt").read_text().split("\n")[:7])
STORY = STORY[: STORY.rindex(",") + 1]  # it ends inside a sentence: suggestions continue it
MEMORY = (
    "A fairy tale told in the old style, slow and plain. The weaver is kind but proud; "
    "the village fears the river in spring."
)
LORE = (LoreEntry(("weaver",), "The weaver is called Maren. She never sells her cloth."),)
NOTES = (("no note", "", 3), ("note, depth 1", "[Keep it dark.]", 1),
         ("note, depth 3", "[Keep it dark.]", 3))  # fmt: skip
PARAMS = SearchParams(cutoff=0.1, max_depth=8, max_suggestions=12, auto_stop=False)
REPEATS = 3


@dataclass(frozen=True)
class Round:
    """One case's three searches: prefill tokens and seconds each, and the note's reach."""

    first: tuple[int, float]
    accept: tuple[int, float]
    new_line: tuple[int, float]
    context_tokens: int
    after_note: int  # tokens from the note to the end, before the accept
    after_note_line: int  # from the note's place before the line was added to the new end


def main() -> None:
    model = ensure_embedded_model(load_settings().cache_dir)
    expand(MLXBackend(model), [1, 2, 3], PARAMS)  # a warm-up, not counted
    rounds: dict[str, list[Round]] = {label: [] for label, _, _ in NOTES}
    for _ in range(REPEATS):  # the cases take turns, so the machine's load falls on all
        for label, note, depth in NOTES:
            rounds[label].append(one_round(MLXBackend(model), Steering(MEMORY, note, depth, LORE)))
    print(f"Steering on MLX: a {len(STORY):,}-character story, memory and one fired lorebook "
          f"entry; search {PARAMS.max_depth} deep, {PARAMS.max_suggestions} suggestions; "
          f"medians of {REPEATS} fresh backends (the machine was shared and loaded)")  # fmt: skip
    base = _median(rounds["no note"], "accept")
    for label, runs in rounds.items():
        r = runs[0]
        accept_s = _median(runs, "accept")
        print(f"{label:<14} context {r.context_tokens} tokens")
        print(f"{'':<14} first    {r.first[0]:5d} prefill  {_median(runs, 'first'):6.3f} s")
        reach = f" (note to end: {r.after_note})" if label != "no note" else ""
        print(f"{'':<14} accept   {_prefills(runs, 'accept'):>5} prefill  {accept_s:6.3f} s"
              f"  x{accept_s / base:.2f} of no note{reach}")  # fmt: skip
        reach = f" (note to end: {r.after_note_line})" if label != "no note" else ""
        print(f"{'':<14} new line {_prefills(runs, 'new_line'):>5} prefill  "
              f"{_median(runs, 'new_line'):6.3f} s{reach}")  # fmt: skip


def one_round(backend: MLXBackend, steering: Steering) -> Round:
    """Search, accept the top suggestion that adds no line, search; then add a line, search."""
    text, ids = STORY, backend.tokenize(STORY)
    context = fitted_context(backend, steering, text, ids, room=PARAMS.max_depth)
    first = _search(backend, context)
    taken = next(s for s in first[0].suggestions if s.exact and "\n" not in s.text)
    text, ids = text + taken.text, ids + list(taken.token_ids)
    after = fitted_context(backend, steering, text, ids, room=PARAMS.max_depth)
    accept = _search(backend, after)
    line = backend.tokenize(".\nThen")
    moved = fitted_context(backend, steering, text + ".\nThen", ids + line, room=PARAMS.max_depth)
    new_line = _search(backend, moved)
    return Round(
        (first[0].stats.prefill_tokens, first[1]),
        (accept[0].stats.prefill_tokens, accept[1]),
        (new_line[0].stats.prefill_tokens, new_line[1]),
        context.token_count,
        context.token_count - _before_note(context),
        moved.token_count - _before_note(after),
    )


def _before_note(context: Context) -> int:
    """How many ids come before the author's note (all of them when there is none): what
    an accept that adds no line leaves as it was."""
    return sum(part.token_count for part in takewhile(lambda p: p.kind != "note", context.parts))


def _search(backend: MLXBackend, context: Context) -> tuple[SearchResult, float]:
    started = time.perf_counter()
    result = expand(backend, list(context.ids), PARAMS)
    return result, time.perf_counter() - started


def _median(runs: list[Round], name: str) -> float:
    return statistics.median(getattr(r, name)[1] for r in runs)


def _prefills(runs: list[Round], name: str) -> str:
    """The prefill tokens of each run: the same every time, else all of them."""
    counts = sorted({getattr(r, name)[0] for r in runs})
    return str(counts[0]) if len(counts) == 1 else "/".join(map(str, counts))


if __name__ == "__main__":
    main()
