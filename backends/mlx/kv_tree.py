"""The KV-cache fragment tree: a radix trie over token ids whose nodes hold KV.

Each node keeps only the keys and values of its own tokens, all layers stacked into one
array of shape (layers, kv_heads, tokens, head_dim), plus the next-token candidates
after its last token when they are known. A context's cache is its path's fragments
joined. Nodes split where contexts diverge, so an edited story reuses its longest common
prefix; memory is capped by bytes, dropping the least recently used leaves first, and
look-ahead's before those: a fragment filed while `ahead` is set (the backend sets it
for look-ahead's forwards) is look-ahead's until a writer's request matches it.

This module owns the tree alone: it runs no model (that is `backends.mlx.backend`) and is not
thread-safe: the backend uses it from its one MLX worker thread only.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from itertools import count

import mlx.core as mx

from backends.base import Candidate

TOKEN_AXIS = 2


@dataclass(eq=False)
class Fragment:
    """One trie node: a run of tokens and their KV; `top` is what may follow the last one,
    `inner[n]` what may follow its first n (kept when nodes are merged)."""

    tokens: list[int]
    keys: mx.array | None = None  # (layers, kv_heads, len(tokens), head_dim)
    values: mx.array | None = None
    parent: Fragment | None = None
    children: dict[int, Fragment] = field(default_factory=dict)
    top: list[Candidate] | None = None
    inner: dict[int, list[Candidate]] = field(default_factory=dict)
    last_used: int = 0
    ahead: bool = False  # filed by look-ahead and not yet reached by a writer

    @property
    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return self.keys.nbytes + self.values.nbytes


@dataclass(frozen=True)
class Match:
    """How much of a context the tree holds: `steps` pairs each node with the tokens used."""

    steps: tuple[tuple[Fragment, int], ...]
    length: int

    @property
    def top(self) -> list[Candidate] | None:
        """Cached candidates after the matched tokens, when the tree holds them."""
        if not self.steps:
            return None
        node, used = self.steps[-1]
        return node.top if used == len(node.tokens) else node.inner.get(used)


class FragmentTree:
    """A trie of KV fragments with a byte cap."""

    def __init__(self, max_bytes: int):
        self.root = Fragment(tokens=[])
        self.max_bytes = max_bytes
        self.nbytes = 0
        self.ahead = False  # the work in progress is look-ahead's (see the module's docstring)
        self._clock = count(1)

    # -- reading ---------------------------------------------------------------------
    def match(self, ids: list[int]) -> Match:
        """The longest prefix of `ids` the tree holds; marks its nodes as recently used (and,
        outside look-ahead, as a writer's)."""
        steps: list[tuple[Fragment, int]] = []
        node, i, now = self.root, 0, next(self._clock)
        while i < len(ids) and (child := node.children.get(ids[i])) is not None:
            used = _common_prefix(child.tokens, ids, i)
            steps.append((child, used))
            child.last_used = now
            child.ahead = child.ahead and self.ahead
            i += used
            if used < len(child.tokens):
                break
            node = child
        return Match(tuple(steps), i)

    def segments(
        self, match: Match, length: int, start: int = 0
    ) -> list[tuple[mx.array, mx.array]]:
        """The KV of tokens [start, length) of a match as each node holds it, in order: no
        copy (a node used in part is a slice of its arrays)."""
        segments, offset = [], 0
        for node, used in match.steps:
            lo, hi = max(start - offset, 0), min(used, length - offset)
            offset += used
            if hi > lo:
                whole = lo == 0 and hi == len(node.tokens)
                segments.append(
                    (node.keys, node.values)
                    if whole
                    else (node.keys[:, :, lo:hi], node.values[:, :, lo:hi])
                )
            if offset >= length:
                break
        return segments

    def gather(self, match: Match, length: int, start: int = 0) -> tuple[mx.array, mx.array] | None:
        """The joined KV of tokens [start, length) of a match, or None for none."""
        segments = self.segments(match, length, start)
        if not segments:
            return None
        if len(segments) == 1:
            return segments[0]
        keys, values = zip(*segments, strict=True)
        return mx.concatenate(keys, axis=TOKEN_AXIS), mx.concatenate(values, axis=TOKEN_AXIS)

    # -- writing ---------------------------------------------------------------------
    def join(self, match: Match, length: int) -> Match:
        """Merge runs of whole nodes within the match's first `length` tokens that nothing
        else branches from into one node each; return the match over the merged nodes.

        A story read in chunks is a chain of fragments that every depth of a search reads
        for each of its rows; joined once, its KV is one array, read in one matmul a layer
        instead of one per chunk. The old nodes keep their tokens and KV, so matches made
        before stay valid, but lose their links: no cycle keeps them (and their KV, the
        size of the story) alive once no match holds them. The merged node keeps every
        node's candidates (`inner`), so searching again at any of them needs no forward.
        """
        steps, offset, run = [], 0, []
        for node, used in match.steps:
            whole = used == len(node.tokens) and offset + used <= length
            offset += used
            if whole:
                run.append(node)
                if len(node.children) == 1 and offset < length:
                    continue
            steps.extend(self._merge(run))
            run = []
            if not whole:
                steps.append((node, used))
        steps.extend(self._merge(run))
        return Match(tuple(steps), match.length)

    def insert(
        self,
        ids: list[int],
        start: int,
        keys: mx.array,
        values: mx.array,
        top: list[Candidate] | None,
    ) -> None:
        """File the KV of ids[start:] (the tree must hold ids[:start]) and the candidates after.

        Positions the tree already holds keep their KV; a node is split where `ids` leaves it.
        """
        match = self.match(ids)
        if match.length < start:
            raise ValueError("insert needs the context's prefix in the tree")
        parent = self._split_at(match, match.length)
        if match.length < len(ids):
            offset = match.length - start
            node = Fragment(
                tokens=list(ids[match.length :]),
                keys=mx.contiguous(keys[:, :, offset:]) if offset else keys,
                values=mx.contiguous(values[:, :, offset:]) if offset else values,
                parent=parent,
                last_used=next(self._clock),
                ahead=self.ahead,
            )
            parent.children[node.tokens[0]] = node
            self.nbytes += node.nbytes
            parent = node
        if top is not None:
            parent.top = top

    def evict(self) -> None:
        """Drop leaves until the tree fits its byte cap: look-ahead's first, then a
        writer's, least recently used first.

        The leaves are gathered once into a heap; a node whose last child is dropped
        joins it as a leaf, so each call walks the tree once, not once per dropped node."""
        if self.nbytes <= self.max_bytes:
            return
        order = count()  # ties in last_used go in any fixed order: nodes do not compare
        heap = [(not leaf.ahead, leaf.last_used, next(order), leaf) for leaf in self._leaves()]
        heapq.heapify(heap)
        while self.nbytes > self.max_bytes and heap:
            leaf = heapq.heappop(heap)[-1]
            parent = leaf.parent
            del parent.children[leaf.tokens[0]]
            self.nbytes -= leaf.nbytes
            if parent is not self.root and not parent.children:
                heapq.heappush(heap, (not parent.ahead, parent.last_used, next(order), parent))

    def clear(self) -> None:
        self.root.children.clear()
        self.nbytes = 0

    # -- internals -------------------------------------------------------------------
    def _split_at(self, match: Match, length: int) -> Fragment:
        """The node that ends exactly at `length` tokens of the match, splitting one if needed."""
        if not match.steps:
            return self.root
        node, used = match.steps[-1]
        if used == len(node.tokens):
            return node
        head = Fragment(
            tokens=node.tokens[:used],
            keys=mx.contiguous(node.keys[:, :, :used]),
            values=mx.contiguous(node.values[:, :, :used]),
            parent=node.parent,
            top=node.inner.get(used),
            inner={n: top for n, top in node.inner.items() if n < used},
            last_used=node.last_used,
            ahead=node.ahead,
        )
        node.inner = {n - used: top for n, top in node.inner.items() if n > used}
        self.nbytes -= node.nbytes
        node.tokens = node.tokens[used:]
        node.keys = mx.contiguous(node.keys[:, :, used:])
        node.values = mx.contiguous(node.values[:, :, used:])
        node.parent.children[head.tokens[0]] = head
        node.parent = head
        head.children[node.tokens[0]] = node
        self.nbytes += head.nbytes + node.nbytes
        return head

    def _merge(self, run: list[Fragment]) -> list[tuple[Fragment, int]]:
        """One node in place of a chain of whole nodes (each the only child of the last)."""
        if len(run) < 2:
            return [(node, len(node.tokens)) for node in run]
        first, last = run[0], run[-1]
        merged = Fragment(
            tokens=[t for node in run for t in node.tokens],
            keys=mx.concatenate([node.keys for node in run], axis=TOKEN_AXIS),
            values=mx.concatenate([node.values for node in run], axis=TOKEN_AXIS),
            parent=first.parent,
            children=dict(last.children),
            top=last.top,
            inner=_inner_tops(run),
            last_used=max(node.last_used for node in run),
            ahead=all(node.ahead for node in run),
        )
        first.parent.children[merged.tokens[0]] = merged
        for child in merged.children.values():
            child.parent = merged
        for node in run:
            node.parent, node.children = None, {}
        return [(merged, len(merged.tokens))]

    def _leaves(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                yield node


def shared_prefix(matches: list[Match], limit: int) -> int:
    """How many leading tokens every match holds in the very same nodes (at most `limit`)."""
    shared = 0
    for steps in zip(*(m.steps for m in matches), strict=False):
        node, used = steps[0]
        if any(other is not node for other, _ in steps):
            break
        shared += min(u for _, u in steps)
        if any(u != used for _, u in steps) or used < len(node.tokens):
            break
    return min(shared, limit)


def _common_prefix(tokens: list[int], ids: list[int], start: int) -> int:
    n = 0
    limit = min(len(tokens), len(ids) - start)
    while n < limit and tokens[n] == ids[start + n]:
        n += 1
    return n


def _inner_tops(run: list[Fragment]) -> dict[int, list[Candidate]]:
    """The candidates held inside and at the end of each node of a run but the last, by
    their position in the run's joined tokens."""
    tops, offset = {}, 0
    for node in run:
        tops.update({offset + n: top for n, top in node.inner.items()})
        offset += len(node.tokens)
        if node is not run[-1] and node.top is not None:
            tops[offset] = node.top
    return tops
