"""A context's top-k from the model over the KV fragment tree: plan, prefill, batched step.

Free functions over a `Net` (the model and what a forward needs to know of it) and the
`FragmentTree`, as mlx-lm keeps its cache helpers beside its caches. `answer` plans each
context against the tree (`plan`: cached, one token past a cached prefix, or a longer
tail): cached answers first, then each longer tail prefilled in chunks (`prefill`, after
what the disk holds of it, `backends.mlx.kv_keep`), then one batched forward for every
context that adds one token to a cached prefix (`step`). A forward (`forward`) runs over
per-layer caches assembled from the tree (`batch_cache`): left-padded `BatchKVCache`s,
with the prefix a run of rows shares kept as one copy when our attention is installed
(`backends.mlx.attention`); each row's new KV is filed under its own node. A context may
come with ids to weigh beside its top-k (`Asked`, a search's bias): they are read from
the same logits as the top-k, and a context whose cached candidates lack one is run
again for its last token (the tree keeps each node's top-k only).

Every function here runs on the MLX worker (`backends.mlx.worker`) and appends what it
ran to the `ran` list it is given (`backends.mlx.batching.Forward`). Does not own:
threads, cancellation, batching requests across sessions, sampling (`sampling`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache

from backends.base import Candidate
from backends.errors import BackendError
from backends.mlx.attention import RowsCache, SharedPrefix
from backends.mlx.batching import Forward
from backends.mlx.head import last_logits
from backends.mlx.kv_disk import DiskKV
from backends.mlx.kv_keep import keep as keep_on_disk
from backends.mlx.kv_keep import restore
from backends.mlx.kv_tree import FragmentTree, Match, shared_prefix
from backends.mlx.numpy_views import writable
from backends.mlx.ranking import ranked

Context = tuple[int, ...]
Asked = Mapping[Context, frozenset[int]]  # per context, ids to weigh beside its top-k


@dataclass(frozen=True)
class Net:
    """The model and what a forward needs to know of it."""

    model: Any
    pieces: list[bytes]  # every token's bytes (`backends.mlx.tokens`)
    kv_shape: tuple[int, int, int]  # (layers, kv_heads, head_dim)
    dtype: mx.Dtype  # its activations'
    cache_class: type  # the batch cache its attention reads
    rows_attention: bool  # `backends.mlx.attention` is installed in it

    @classmethod
    def of(cls, model, pieces: list[bytes], *, rows_attention: bool) -> Net:
        shape = _kv_shape(model)
        grouped = type(model).__module__ == "mlx_lm.models.gemma2"
        grouped = grouped and shape[1] < model.args.num_attention_heads
        cache_class = GroupedBatchKVCache if grouped else BatchKVCache
        return cls(model, pieces, shape, _activation_dtype(model), cache_class, rows_attention)

    @property
    def vocab(self) -> int:
        """Tokens the tokenizer names (a model's head may be padded past them)."""
        return len(self.pieces)

    def candidates(self, ids: list[int], logprobs: list[float]) -> list[Candidate]:
        return [
            Candidate(i, self.pieces[i].decode("utf-8", errors="replace"), lp, self.pieces[i])
            for i, lp in zip(ids, logprobs, strict=True)
        ]


@dataclass(frozen=True)
class Row:
    """One context to answer: reuse `reuse` tokens of cache, run the rest."""

    ids: Context
    match: Match
    reuse: int

    @property
    def tail(self) -> int:
        return len(self.ids) - self.reuse


def answer(
    net: Net,
    tree: FragmentTree,
    contexts: set[Context],
    k: int,
    *,
    asked: Asked,
    chunk: int,
    disk: DiskKV | None,
    keep: bool,
    ran: list[Forward],
) -> dict[Context, list[Candidate]]:
    """Each context's top-k, then the ids `asked` names for it that are not among them,
    most likely first. Cached answers first, then prefills one by one, then one batched
    step for the rest."""
    answers: dict[Context, list[Candidate]] = {}
    pending = []
    for ids in sorted(contexts):
        want = asked.get(ids, frozenset())
        row = plan(tree, ids, k, want)
        if row.tail == 0:
            answers[ids] = cached(row.match.top, k, want)
        elif row.tail == 1 and row.reuse > 0:
            pending.append(ids)
        else:
            answers[ids] = prefill(net, tree, ids, k, want, chunk=chunk, disk=disk, keep=keep,
                                   ran=ran)  # fmt: skip
    steps = []
    for ids in pending:  # planned again: a prefill may have split the nodes they use
        row = plan(tree, ids, k, asked.get(ids, frozenset()))
        if row.tail == 0:
            answers[ids] = cached(row.match.top, k, asked.get(ids, frozenset()))
        else:
            steps.append(row)
    if steps:
        wants = [asked.get(row.ids, frozenset()) for row in steps]
        answers.update(step(net, tree, steps, k, wants, ran))
    return answers


def plan(tree: FragmentTree, ids: Context, k: int, want: frozenset[int] = frozenset()) -> Row:
    """How much of `ids` the tree holds (all of it only with at least k candidates, the
    ids `want` names among them)."""
    match = tree.match(list(ids))
    top = match.top
    whole = match.length == len(ids) and top is not None and len(top) >= k
    if whole and (not want or want <= {c.token_id for c in top}):
        return Row(ids, match, len(ids))
    return Row(ids, match, min(match.length, len(ids) - 1))


def cached(top: list[Candidate], k: int, want: frozenset[int]) -> list[Candidate]:
    """A cached top's first k, then those of `want` among the rest (`plan` made sure all
    are there)."""
    return top[:k] + [c for c in top[k:] if c.token_id in want] if want else top[:k]


def prefill(
    net: Net,
    tree: FragmentTree,
    ids: Context,
    k: int,
    want: frozenset[int] = frozenset(),
    *,
    chunk: int,
    disk: DiskKV | None,
    keep: bool,
    ran: list[Forward],
) -> list[Candidate]:
    """Run a context's uncached tail in chunks, after what the disk holds of it; file
    each chunk as a fragment; keep a context read at length on disk (`keep`). Returns
    its top-k, then the ids of `want` not among them."""
    top: list[Candidate] = []
    extra: list[Candidate] = []
    restore(tree, disk, ids, net.candidates)
    row = plan(tree, ids, k, want)
    if row.tail == 0:  # the disk held it all, with its candidates
        return cached(row.match.top, k, want)
    start = row.reuse
    while start < len(ids):
        end = min(start + chunk, len(ids))
        match = tree.match(list(ids[:start]))
        last = end == len(ids)
        asked = [want if last else frozenset()]
        [top], [extra], keys, values = forward(net, tree, [ids[:end]], [match], [start], k, asked)
        tree.insert(list(ids[:end]), start, keys[0], values[0], top if last else None)
        ran.append(Forward((ids,), end - start, prefill=True))
        start = end
    if keep and top:
        keep_on_disk(tree, disk, ids, top)
    return top + extra


def step(
    net: Net,
    tree: FragmentTree,
    rows: list[Row],
    k: int,
    asked: Sequence[frozenset[int]],
    ran: list[Forward],
) -> dict[Context, list[Candidate]]:
    """One batched forward: every row adds its last token to a cached prefix."""
    contexts, matches = [row.ids for row in rows], [row.match for row in rows]
    reuses = [row.reuse for row in rows]
    tops, extras, keys, values = forward(net, tree, contexts, matches, reuses, k, asked)
    for row, top, row_keys, row_values in zip(rows, tops, keys, values, strict=True):
        tree.insert(list(row.ids), row.reuse, row_keys, row_values, top)
    ran.append(Forward(tuple(row.ids for row in rows), 1, prefill=False))
    return {row.ids: top + extra for row, top, extra in zip(rows, tops, extras, strict=True)}


def forward(net: Net, tree: FragmentTree, contexts, matches, reuses, k, asked):
    """Run contexts[i][reuses[i]:] (equal lengths) after their cached prefixes.

    Returns each row's top-k after its last token, the ids of asked[i] not among them
    (most likely first), and the new tokens' KV per row as (layers, kv_heads,
    new_tokens, head_dim) arrays.
    """
    new = len(contexts[0]) - reuses[0]
    inputs = mx.array([list(ctx[reuse:]) for ctx, reuse in zip(contexts, reuses, strict=True)])
    cache, width = batch_cache(net, tree, matches, reuses, new)  # new tokens at [width, +new)
    k = min(k, net.vocab)
    with model_errors():
        logits = last_logits(net.model, inputs, cache).astype(mx.float32)  # (B, vocab)
        # Each row's new KV as its own array, so no fragment pins the whole batch.
        new_keys = mx.stack([c.keys[:, :, width : width + new] for c in cache])
        new_values = mx.stack([c.values[:, :, width : width + new] for c in cache])
        row_keys = [mx.contiguous(new_keys[:, i]) for i in range(len(contexts))]
        row_values = [mx.contiguous(new_values[:, i]) for i in range(len(contexts))]
        mx.eval(logits, *row_keys, *row_values)
        # A vocabulary padded past the tokenizer's (Qwen's) offers only real tokens.
        wanted = [sorted(ids) for ids in asked]
        also = _padded(wanted)
        order, picked, weighed = ranked(writable(logits)[:, : net.vocab], k, also)
    pairs = zip(order.tolist(), picked.tolist(), strict=True)
    tops = [net.candidates(o, p) for o, p in pairs]
    extras = [[] for _ in tops]
    if also is not None:
        for top, extra, ids, lps in zip(tops, extras, wanted, weighed.tolist(), strict=True):
            ranked_ids = {c.token_id for c in top}
            more = [(i, lp) for i, lp in zip(ids, lps, strict=False) if i not in ranked_ids]
            more.sort(key=lambda pair: -pair[1])
            extra += net.candidates([i for i, _ in more], [lp for _, lp in more])
    return tops, extras, row_keys, row_values


def _padded(wanted: list[list[int]]) -> np.ndarray | None:
    """The asked ids as one (rows, m) array, each row padded with id 0 (read, not used);
    None where no row asks any."""
    m = max((len(ids) for ids in wanted), default=0)
    if m == 0:
        return None
    return np.array([ids + [0] * (m - len(ids)) for ids in wanted], dtype=np.int64)


def batch_cache(
    net: Net, tree: FragmentTree, matches: list[Match], reuses: list[int], new: int
) -> tuple[list, int]:
    """Per-layer caches holding each row's joined fragments, left-padded, and where in
    them the new tokens land.

    With `backends.mlx.attention` installed, fragments that a run of rows all hold (their
    story: rows come sorted by ids, so a story's rows are adjacent) stay one shared
    copy per run; the rest is joined per row in a `BatchKVCache`, with `new` spare
    slots at the end so the forward writes in place instead of growing (and so
    copying) the arrays.
    """
    prefixes, shares = (
        _shared_prefixes(tree, matches, reuses) if net.rows_attention else ([], [0] * len(matches))
    )
    own = [reuse - share for reuse, share in zip(reuses, shares, strict=True)]
    width = max(own)
    padding = [width - n for n in own]
    keys, values = [], []
    for match, reuse, share, pad in zip(matches, reuses, shares, padding, strict=True):
        kv = tree.gather(match, reuse, start=share)
        keys.append(_pad(net, kv[0] if kv else None, pad, new))
        values.append(_pad(net, kv[1] if kv else None, pad, new))
    keys = mx.stack(keys, axis=1)  # (layers, B, kv_heads, width + new, head_dim)
    values = mx.stack(values, axis=1)
    offsets, lengths = mx.array(own), mx.array(shares)
    caches = []
    for layer in range(keys.shape[0]):
        # `a[layer, ...]`, not `a[layer]`: MLX (0.32) copies on a lone integer index,
        # which here would copy the whole story's KV at every forward.
        cache = net.cache_class(padding)  # its fields set by name: `state`'s tuple grew in
        cache.keys, cache.values = keys[layer, ...], values[layer, ...]  # mlx-lm 0.32.2
        cache.offset, cache._idx = offsets, width
        if net.rows_attention:
            shared = [
                SharedPrefix(
                    start, end, [k[layer, ...] for k, _ in kv], [v[layer, ...] for _, v in kv]
                )
                for start, end, kv in prefixes
            ]
            cache = RowsCache(cache, padding, shared, lengths)
        caches.append(cache)
    return caches, width


@contextmanager
def model_errors() -> Iterator[None]:
    """Within this block, the model's own failure on an input is a `BackendError`."""
    try:
        yield
    except (RuntimeError, ValueError) as e:
        raise BackendError(f"the model failed on this input: {e}", backend="mlx") from e


def _shared_prefixes(tree: FragmentTree, matches: list[Match], reuses: list[int]):
    """Runs of adjacent rows that begin in the same node: each run's common prefix
    (start, end, its KV segments), and every row's shared length. A prefix that many
    rows read (a search's depth) is joined into one fragment first, once; one read by
    a single row (a chunk of a story being read) is read in the segments it lies in:
    joining it would copy the whole story so far at every chunk."""
    prefixes, shares, start = [], [0] * len(matches), 0
    while start < len(matches):
        first = matches[start].steps[0][0] if matches[start].steps else None
        end = start + 1
        while (
            end < len(matches)
            and first is not None
            and matches[end].steps
            and (matches[end].steps[0][0] is first)
        ):
            end += 1
        run = matches[start:end]
        length = shared_prefix(run, min(reuses[start:end])) if first is not None else 0
        if length:
            match = tree.join(run[0], length) if end - start > 1 else run[0]
            prefixes.append((start, end, tree.segments(match, length)))
            shares[start:end] = [length] * (end - start)
        start = end
    return prefixes, shares


def _pad(net: Net, kv: mx.array | None, left: int, spare: int) -> mx.array:
    """(layers, kv_heads, n, head_dim) -> left zeros, the fragments, spare zeros."""
    layers, heads, head_dim = net.kv_shape
    parts = [mx.zeros((layers, heads, left, head_dim), dtype=net.dtype)] if left else []
    if kv is not None:
        parts.append(kv)
    parts.append(mx.zeros((layers, heads, spare, head_dim), dtype=net.dtype))
    return mx.concatenate(parts, axis=2)


class GroupedBatchKVCache(BatchKVCache):
    """mlx-lm's gemma2 attends with its queries as (B, kv_heads, repeats, T, D) and applies
    the mask as given: a batch's (B, 1, T, S) mask needs one more axis to broadcast there
    (rows of different lengths otherwise fail)."""

    def make_mask(self, N: int, **kwargs):
        mask = super().make_mask(N, **kwargs)
        return mask[:, :, None] if isinstance(mask, mx.array) and mask.ndim == 4 else mask


def _kv_shape(model) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of the model's attention cache."""
    args = model.args
    heads = getattr(args, "num_key_value_heads", None) or args.num_attention_heads
    head_dim = getattr(args, "head_dim", None) or args.hidden_size // args.num_attention_heads
    return len(model.layers), heads, head_dim


def _activation_dtype(model) -> mx.Dtype:
    embed = model.model.embed_tokens
    return embed.scales.dtype if hasattr(embed, "scales") else embed.weight.dtype
