"""The scores a search's suggestions are ranked by, from a beam's token log-probabilities
and its text.

- `words` (the default): the beam's log-probability per word, less `UNFINISHED` nats
  when its text does not end a clause (it was cut at the depth or the cap). The sum of
  log-probabilities favours the shortest texts, so one- and two-word stubs ("However,")
  crowded the top of every list; per word, a text pays for its words, not its length,
  and a clause that ends beats one cut off mid-way.
- `joint`: the sum of log-probabilities, the probability of the whole text (LLooM's
  default until 2026-11-27).
- `lloom`: LLooM v0.3's sum of the tokens' raw probabilities (favours long beams).

bench/bench_ranking.py measures them, and the candidates tried on the way, on the
panel. This module only scores; pooling and sorting are `weave.search.tree`'s, the bars'
shares `weave.view.present`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

Score = Literal["words", "joint", "lloom"]
CLAUSE_ENDS = ".,;:!?"
UNFINISHED = 1.0  # nats off the per-word score of a text that ends mid-clause


def beam_score(logprobs: Sequence[float], text: str, score: Score) -> float:
    """A beam's score: `logprobs` are its tokens', `text` what it offers (after any cut)."""
    if score == "lloom":
        return math.fsum(math.exp(lp) for lp in logprobs)
    joint = math.fsum(logprobs)
    if score == "joint":
        return joint
    return joint / words(text) - (0.0 if ends_clause(text) else UNFINISHED)


def words(text: str) -> int:
    """Words in `text`, at least 1 (a text of punctuation or spaces counts as one)."""
    return max(len(text.split()), 1)


def ends_clause(text: str) -> bool:
    """Whether `text` ends a clause: its last character, past spaces, is one of CLAUSE_ENDS."""
    return text.rstrip()[-1:] in tuple(CLAUSE_ENDS)
