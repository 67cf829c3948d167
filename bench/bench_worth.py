"""What the tree is worth beside sampling, at an equal number of model tokens.

For each passage of `bench.panel`, on the real MLX backend (the embedded SmolLM2-135M)
with the model's default search settings:
  tree      one search (`weave.search.beams.expand`): its suggestions, their probability mass
            (`weave.search.worth`: exact, the tree enumerates them) and its tokens, one per
            tree node (the least any backend can evaluate to grow that tree);
  sampling  `weave.search.ramify` draws from the model's own distribution (temperature 1,
            no min-p), each sample read up to where the tree's rules would end it
            (auto-stop's '.' or ',', or the tree's max depth), credited only the
            tokens up to there, drawn until they have spent the tree's tokens. Its mass
            is the sum over its distinct samples of their probability under the model
            (read back with `Backend.alternatives`).
Printed per passage, side by side: suggestions and distinct samples, the mass each
covers, the worth's `sampling_equivalent_n` beside the samples the tokens bought, and
the mass the first N samples drawn covered (N, the equivalent: under the tree's when N
is the lower estimate its docstring says it is).

    .venv/bin/python bench/bench_worth.py
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends import create_backend  # noqa: E402
from backends.base import Backend  # noqa: E402
from bench.panel import PASSAGES  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.ramify import MAX_SAMPLES, RamifyParams, ramify  # noqa: E402
from weave.search.beams import expand, stop_cut  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402
from weave.search.worth import worth  # noqa: E402
# isort: on


@dataclass(frozen=True)
class Side:
    """One side of a passage's comparison."""

    shown: int  # distinct continuations
    mass: float
    tokens: int
    drawn: int = 0  # samples drawn (sampling only)
    first: float | None = None  # sampling: the mass of the first N drawn (N equivalent)


def tree_side(backend: Backend, ids: list[int], params: SearchParams) -> tuple[Side, int]:
    """The search's side, and its sampling-equivalent N."""
    result = expand(backend, ids, params)
    value = worth([s.probability for s in result.suggestions])
    side = Side(len(result.suggestions), value.mass_covered, result.tree.descendants())
    return side, value.sampling_equivalent_n


def cut(backend: Backend, tokens: tuple[int, ...], params: SearchParams) -> tuple[int, ...]:
    """A sample's tokens up to where the search would have ended its beam."""
    tokens = tokens[: params.max_depth]
    if params.auto_stop:
        for end in range(1, len(tokens) + 1):
            if stop_cut(backend.detokenize(list(tokens[:end]))) is not None:
                return tokens[:end]
    return tokens


def sampling_side(
    backend: Backend, ids: list[int], params: SearchParams, budget: int, equivalent: int
) -> Side:
    """Samples drawn until their tokens (each up to its cut) reach `budget`, and at least
    `equivalent` of them (whose distinct mass is `first`)."""
    draw = RamifyParams(n=MAX_SAMPLES, temperature=1.0, min_p=0.0, max_tokens=params.max_depth)
    kept: list[tuple[int, ...]] = []
    spent, seed = 0, 0
    drawn: list[tuple[int, ...]] = []
    while spent < budget or len(drawn) < equivalent:
        samples = ramify(backend, ids, replace(draw, seed=seed)).samples
        seed += 1
        for sample in samples:
            tokens = cut(backend, sample.token_ids, params)
            drawn.append(tokens)
            if spent < budget:
                kept.append(tokens)
                spent += max(len(tokens), 1)
    distinct = {tokens for tokens in kept if tokens}
    mass = math.fsum(math.exp(logprob(backend, ids, tokens)) for tokens in distinct)
    first = {tokens for tokens in drawn[:equivalent] if tokens}
    first_mass = math.fsum(math.exp(logprob(backend, ids, tokens)) for tokens in first)
    return Side(len(distinct), mass, spent, drawn=len(kept), first=first_mass)


def logprob(backend: Backend, ids: list[int], tokens: tuple[int, ...]) -> float:
    """The joint log-probability of `tokens` after `ids`, under the model."""
    rows = backend.alternatives(ids + list(tokens), 1, start=len(ids))
    return math.fsum(row.logprob for row in rows)


def main() -> None:
    settings = load_settings(env={"LLOOM_BACKEND": "mlx"})
    backend = create_backend(settings, env={})
    params = settings.search_for(backend.model_name)
    print(f"{backend.model_name}; {params}")
    print(f"{'passage':<16} {'tokens':>6} | {'tree: shown':>11} {'mass':>7} {'N equiv':>7} |"
          f" {'sampling: drawn':>15} {'distinct':>8} {'mass':>7} | {'mass ratio':>10} |"
          f" {'first N: mass':>13}")  # fmt: skip
    ratios, masses = [], []
    for genre, text in PASSAGES:
        ids = backend.tokenize(text)
        tree, equivalent = tree_side(backend, ids, params)
        sampled = sampling_side(backend, ids, params, tree.tokens, equivalent)
        ratio = tree.mass / sampled.mass if sampled.mass > 0 else math.inf
        ratios.append(ratio)
        masses.append((tree.mass, sampled.mass, tree.shown, sampled.shown))
        print(f"{genre:<16} {tree.tokens:>6} | {tree.shown:>11} {tree.mass:>7.2%} "
              f"{equivalent:>7} | {sampled.drawn:>15} {sampled.shown:>8} {sampled.mass:>7.2%} "
              f"| {ratio:>9.3g}x | {sampled.first:>13.2%}")  # fmt: skip
    tree_mass, sample_mass, shown, distinct = (
        statistics.fmean(col) for col in zip(*masses, strict=True)
    )
    print(f"mean: tree {shown:.1f} suggestions covering {tree_mass:.2%}; sampling {distinct:.1f} "
          f"distinct covering {sample_mass:.2%}; median mass ratio "
          f"{statistics.median(ratios):.1f}x")  # fmt: skip
    backend.close()


if __name__ == "__main__":
    main()
