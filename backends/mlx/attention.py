"""Attention for the MLX backend's forwards on CPU: BLAS matmuls, numpy's vectorised exp,
and a prefix that every row of a batch shares, read once instead of copied.

Why not `mx.fast.scaled_dot_product_attention`: on CPU it is a matmul, a softmax and a
matmul, and MLX's CPU backend computes `exp` one element at a time (about 10 ns each on
this machine), so the softmax cost three times both matmuls together (256 queries over
2,048 keys, one layer: 50 ms against 17 ms) and a chunk's cost grew with its position.
Here MLX computes the scores on BLAS, numpy normalises them in place in the very buffer
MLX wrote (a numpy view of an evaluated MLX array shares its memory), its `exp` is SIMD
(about 0.7 ns an element), and MLX multiplies the weights by the values. The division by
each row's total is done on the small output instead of the large weights.

A search's depth runs many beams that all continue one story: `RowsCache` holds the
story's KV once for all its rows (a `SharedPrefix`; a batch joining several writers'
searches has one per story), each row's own tokens in a left-padded `BatchKVCache`;
their scores are softmaxed together, which is exactly attention over the joined keys.
A prefix may come in segments (the fragments a story was read in), each read where it
lies: a long story read chunk by chunk is never copied into one array to be read again.
The masks (each row's left padding, causality among the new tokens) are applied here
from the cache's own bookkeeping, so the model's mask is not built.

`install(model)` routes the model module's attention through here for `RowsCache`; any
other cache (and a plain forward without one) passes straight through to mlx-lm. This
module knows nothing of trees.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache

from backends.mlx.cpu_routes import route
from backends.mlx.numpy_views import shared_view

# exp(64) is 6e27: a row of a million keys sums below float32's 3e38; exp(-64) is 2e-28,
# far above its smallest normal number (1e-38).
EXP_SAFE = 64.0


@dataclass(frozen=True)
class SharedPrefix:
    """KV that rows [start, end) of a batch all begin with, in segments of
    (kv_heads, P_i, head_dim) each, in order."""

    start: int
    end: int
    keys: list[mx.array]
    values: list[mx.array]


class RowsCache:
    """One layer's cache: prefixes each shared by a run of rows (a batch may hold rows of
    several stories), then each row's own tokens in `rows`, left-padded by `padding[i]`.
    `prefix_lengths[i]` is row i's prefix length (0 for none): positions count it."""

    def __init__(
        self,
        rows: BatchKVCache,
        padding: list[int],
        prefixes: list[SharedPrefix],
        prefix_lengths: mx.array,
    ):
        self.rows = rows
        self.padding = padding
        self.prefixes = prefixes
        self.prefix_lengths = prefix_lengths

    @property
    def offset(self) -> mx.array:
        return self.rows.offset + self.prefix_lengths

    @property
    def keys(self) -> mx.array:
        return self.rows.keys

    @property
    def values(self) -> mx.array:
        return self.rows.values

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        return self.rows.update_and_fetch(keys, values)

    def make_mask(self, N: int, **kwargs) -> None:
        """No mask array: `attention` masks from `padding` and the causal order itself."""
        return None


def install(model) -> bool:
    """Route `model`'s attention through `attention`; False where its module has no hook
    or MLX runs on a GPU (its fused kernel is the fast path there)."""
    return route(model, "scaled_dot_product_attention", _for_rows_caches)


def _for_rows_caches(original):
    def routed(queries, keys, values, cache, scale, mask, sinks=None):
        if not isinstance(cache, RowsCache):
            return original(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks)
        if sinks is not None:
            raise ValueError("attention sinks are not supported by the rows attention")
        return attention(queries, keys, values, cache, scale)

    return routed


def attention(queries, keys, values, cache: RowsCache, scale: float) -> mx.array:
    """Softmax attention of queries (B, Hq, T, D) over each row's shared prefix and then
    its own keys (B, Hkv, S, D), the last T of which are the queries' own tokens."""
    batch, q_heads, steps, dim = queries.shape
    kv_heads = keys.shape[1]
    rows = (q_heads // kv_heads) * steps  # query rows per kv head: grouped heads x steps
    q = (queries * scale).reshape(batch, kv_heads, rows, dim)
    own = q @ keys.swapaxes(-1, -2)  # (B, Hkv, rows, S)
    shared = []  # per prefix, per segment: the run's queries against it, (Hkv, n*rows, P_i)
    for prefix in cache.prefixes:
        flat = q[prefix.start : prefix.end].transpose(1, 0, 2, 3).reshape(kv_heads, -1, dim)
        shared.append([flat @ segment.swapaxes(-1, -2) for segment in prefix.keys])
    mx.eval(own, *(scores for segments in shared for scores in segments))
    own_view = _shared_view(own)
    _mask(own_view.reshape(batch, kv_heads, -1, steps, keys.shape[2]), cache.padding)
    parts = [(slice(0, batch), own_view)]
    for prefix, segments in zip(cache.prefixes, shared, strict=True):
        for scores in segments:
            view = _shared_view(scores).reshape(kv_heads, prefix.end - prefix.start, rows, -1)
            parts.append((slice(prefix.start, prefix.end), view.transpose(1, 0, 2, 3)))
    totals = _exp_in_place(parts)  # (B, Hkv, rows, 1)
    out = own @ values  # (B, Hkv, rows, D); `own` now holds the weights
    if cache.prefixes:
        out = out + _prefix_outputs(cache.prefixes, shared, batch, kv_heads, rows, dim)
    out = out / mx.array(totals)
    return out.reshape(batch, q_heads, steps, dim).astype(queries.dtype)


def _prefix_outputs(prefixes, weights, batch, kv_heads, rows, dim) -> mx.array:
    """Each run's weights times its prefix's values (summed over its segments), zeros for
    rows without a prefix."""
    pieces, done = [], 0
    for prefix, segments in zip(prefixes, weights, strict=True):
        if prefix.start > done:
            pieces.append(mx.zeros((prefix.start - done, kv_heads, rows, dim), segments[0].dtype))
        out = segments[0] @ prefix.values[0]
        for w, values in zip(segments[1:], prefix.values[1:], strict=True):
            out = out + w @ values
        out = out.reshape(kv_heads, prefix.end - prefix.start, rows, dim)
        pieces.append(out.transpose(1, 0, 2, 3))
        done = prefix.end
    if done < batch:
        pieces.append(mx.zeros((batch - done, kv_heads, rows, dim), pieces[0].dtype))
    return pieces[0] if len(pieces) == 1 else mx.concatenate(pieces, axis=0)


def _shared_view(scores: mx.array) -> np.ndarray:
    """The scores, in MLX's own memory (a matmul's output: always viewable)."""
    view = shared_view(scores)
    assert view is not None, "numpy copied the scores"
    return view


def _mask(scores: np.ndarray, padding: list[int]) -> None:
    """Hide each row's left padding and, among the last T keys, the queries' future.
    scores: (B, Hkv, G, T, S), written in place."""
    for row, pad in enumerate(padding):
        if pad:
            scores[row, ..., :pad] = -np.inf
    steps = scores.shape[-2]
    if steps > 1:
        future = np.triu(np.full((steps, steps), -np.inf, scores.dtype), 1)
        scores[..., -steps:] += future


def _exp_in_place(parts: list[tuple[slice, np.ndarray]]) -> np.ndarray:
    """exp(score - row max) over every part a row has, in place; returns the row totals.
    parts: (the batch rows it covers, scores (rows, Hkv, query rows, keys)).

    Where every row's max lies within ±`EXP_SAFE`, exp(score) itself neither overflows
    nor loses the row's largest terms, and the weights differ from exp(score - max) only
    by a factor per row that the division by the totals removes: the subtraction, a pass
    over every score, is skipped."""
    (_, own), rest = parts[0], parts[1:]
    top = own.max(axis=-1, keepdims=True)
    for rows, part in rest:
        np.maximum(top[rows], part.max(axis=-1, keepdims=True), out=top[rows])
    shift = not np.all(np.abs(top) <= EXP_SAFE)
    totals = np.zeros_like(top)
    for rows, part in parts:
        if shift:
            np.subtract(part, top[rows], out=part)
        np.exp(part, out=part)
        totals[rows] += part.sum(axis=-1, keepdims=True)
    return totals
