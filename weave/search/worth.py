"""What a search's suggestions are worth, in three figures computed from their
probabilities alone.

A threshold tree enumerates its continuations: each suggestion is a leaf of the tree,
its probability the product of its tokens' probabilities under the model. Leaves of one
tree are prefix-free as token sequences (a finished beam grows no children), so the
events "the model's continuation begins with leaf i's tokens" are disjoint and their
probabilities add: `mass_covered` is exact, and at most 1. (Suggestions pooled under
the prefix-space rule hold several leaves; their probability is already the members'
sum.)

- `mass_covered`: the sum of the suggestions' probabilities.
- `effective_choices`: exp of the entropy of the suggestions' probabilities renormalised
  to sum to 1: n for n equally likely suggestions, near 1 when one dominates.
- `sampling_equivalent_n`: the smallest N for which N independent samples from the model
  (at temperature 1, untruncated, each read up to where the tree's rules would end it)
  cover, in expectation, at least `mass_covered` with the distinct continuations they
  show. A sample shows suggestion i with probability p_i; what it shows elsewhere the
  tree cannot know, so we assume the model's other continuations are spread as the
  suggestions are: the whole distribution is 1/M copies of the suggestions
  (M = `mass_covered`; each copy other texts, each as likely as its original). Then
  the mass N samples cover is, in expectation,

      (1 / M) * sum_i p_i (1 - (1 - p_i)^N),

  which rises with N towards 1. The tree takes the likeliest continuations, so the
  others are mostly rarer than this assumes and sampling needs more draws than N: read
  N as "at least about" (bench/bench_worth.py measures it against real sampling). Where
  the suggestions cover everything the cover only tends to their mass, and N is where
  it comes within a float's rounding of it; N is capped at `MAX_SAMPLES`.

This module is pure: it reads probabilities and knows nothing of trees, backends or pages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_SAMPLES = 1_000_000
ROUNDING = 1e-9  # how far over 1 a sum of probabilities may come by rounding


@dataclass(frozen=True)
class Worth:
    """The three figures of one search (see the module's docstring)."""

    mass_covered: float
    effective_choices: float
    sampling_equivalent_n: int

    def to_dict(self) -> dict:
        return {
            "mass_covered": self.mass_covered,  # unrounded: it may be a small fraction
            "effective_choices": round(self.effective_choices, 3),
            "sampling_equivalent_n": self.sampling_equivalent_n,
        }


def worth(probabilities: Sequence[float]) -> Worth:
    """The figures for suggestions of these probabilities (disjoint events, so their sum
    is at most 1; a float a hair over 1, a pooled sum's rounding, is read as 1).

    Raises ValueError for a probability that is not a finite number in [0, 1]."""
    for p in probabilities:
        if not (math.isfinite(p) and 0.0 <= p <= 1.0 + ROUNDING):
            raise ValueError(f"a suggestion's probability is {p!r}, not one in [0, 1]")
    ps = [min(p, 1.0) for p in probabilities if p > 0.0]
    mass = min(math.fsum(ps), 1.0)
    return Worth(mass, effective_choices(ps), sampling_equivalent_n(ps))


def effective_choices(probabilities: Sequence[float]) -> float:
    """exp(entropy) of the probabilities renormalised; 0 for none."""
    total = math.fsum(probabilities)
    if total <= 0.0:
        return 0.0
    shares = [p / total for p in probabilities if p > 0.0]
    return math.exp(-math.fsum(q * math.log(q) for q in shares))


def expected_cover(probabilities: Sequence[float], n: int) -> float:
    """The mass N samples cover in expectation, under the module's assumption about the
    mass outside the suggestions."""
    ps = [p for p in probabilities if p > 0.0]
    if not ps or n <= 0:
        return 0.0
    mass = min(math.fsum(ps), 1.0)
    # 1 - (1 - p)^n, exact for small p: the chance that n draws show a given one
    seen = math.fsum(p * -math.expm1(n * math.log1p(-p)) if p < 1.0 else p for p in ps)
    return seen / mass


def sampling_equivalent_n(probabilities: Sequence[float]) -> int:
    """The smallest N whose expected cover reaches the suggestions' mass (0 for none),
    at most MAX_SAMPLES. The cover rises with N, so a doubling then a bisection find it."""
    ps = [p for p in probabilities if p > 0.0]
    if not ps:
        return 0
    target = min(math.fsum(ps), 1.0) * (1 - 1e-12)  # a float's rounding is no shortfall

    def reaches(n: int) -> bool:
        return expected_cover(ps, n) >= target

    high = 1
    while not reaches(high):
        if high >= MAX_SAMPLES:
            return MAX_SAMPLES
        high = min(high * 2, MAX_SAMPLES)
    low = high // 2  # does not reach (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return high
