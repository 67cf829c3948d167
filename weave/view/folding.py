"""Folding a tree into a graph that stays readable at page width: the one folding that
the token graph (`weave.view.render`) and the story graph (`weave.view.story_graph`) share.

A `Run` is a chain of nodes drawn as one node. A `Fit` is the graph's budget. `shown`
picks the runs to draw by a rank each renderer gives: the runs it ranks first (the best
beam, the path to the cursor) within the fit's columns only, the others in rank order
also within its children per node and its node count. `walk` then goes breadth-first from
the start, placing each shown run and folding the rest below a parent into one "+k more"
node, whose tooltip names them (`listing`). Pure: no graphviz, no escaping (the renderers'
`weave.view.render.label` does that), no tokens and no loom.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Generic, TypeVar

MORE_LISTED = 12  # folded runs named in a "+k more" tooltip

N = TypeVar("N", bound=Hashable)
R = TypeVar("R", bound="Run")


@dataclass(frozen=True)
class Fit:
    """What a graph may hold and stay readable at page width.

    columns:  runs drawn along any path from the start; deeper runs fold into "+k more".
    children: runs drawn below one node (the first ranked first); the rest fold likewise.
    nodes:    runs drawn in all, the first ranked first.
    line, lines: a label's width in characters and its lines; longer text ends in '…'
              (the whole of it is in the node's tooltip).
    """

    columns: int = 4
    children: int = 5
    nodes: int = 30
    line: int = 12
    lines: int = 2


@dataclass(frozen=True)
class Run(Generic[N]):
    """Nodes drawn as one: each but the last has exactly one child."""

    nodes: tuple[N, ...]

    @property
    def first(self) -> N:
        return self.nodes[0]

    @property
    def last(self) -> N:
        return self.nodes[-1]


def shown(
    roots: Sequence[R],
    children: Callable[[R], Sequence[R]],
    rank: Callable[[R, tuple], tuple],
    fit: Fit,
    *,
    column: int = 1,
) -> set:
    """The first nodes of the runs to draw, the roots drawn in `column`.

    `rank(run, above)` orders the runs (lowest first; `above` is the rank of the run above,
    () for a root); a rank whose first item is falsy is drawn whatever the fit's children
    and node count, so that path is always shown (up to the column limit).
    """
    order, heap = count(), []

    def offer(runs: Sequence[R], parent: Hashable, column: int, above: tuple) -> None:
        for run in runs:
            heapq.heappush(heap, (rank(run, above), next(order), run, parent, column))

    drawn: set = set()
    per_parent: Counter = Counter()
    offer(roots, None, column, ())
    while heap:
        key, _, run, parent, column = heapq.heappop(heap)
        full = len(drawn) >= fit.nodes or per_parent[parent] >= fit.children
        if column > fit.columns or (key[0] and full):
            continue
        drawn.add(run.first)
        per_parent[parent] += 1
        offer(children(run), run.first, column + 1, key)
    return drawn


def walk(
    start: str,
    roots: Sequence[R],
    children: Callable[[R], Sequence[R]],
    drawn: set,
    names: Iterator[str],
    place: Callable[[str, str, R], None],
    fold: Callable[[str, str, list[R]], None],
) -> None:
    """Breadth-first from the node named `start`: `place(parent, name, run)` for each run
    in `drawn`, then `fold(parent, name, hidden)` once for the runs below a parent that
    are not."""
    pending = deque([(start, roots)])
    while pending:
        parent, runs = pending.popleft()
        hidden = []
        for run in runs:
            if run.first not in drawn:
                hidden.append(run)
                continue
            name = next(names)
            place(parent, name, run)
            pending.append((name, children(run)))
        if hidden:
            fold(parent, next(names), hidden)


def listing(texts: Sequence[str]) -> str:
    """The folded runs' texts for a "+k more" tooltip: the first `MORE_LISTED`, then how
    many more."""
    listed = " | ".join(texts[:MORE_LISTED])
    return listed + (f" | … {len(texts) - MORE_LISTED} more" if len(texts) > MORE_LISTED else "")
