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
story's KV once for all rows (`prefix`), each row's own tokens in a left-padded
`BatchKVCache`; their scores are softmaxed together, which is exactly attention over the
joined keys. The masks (each row's left padding, causality among the new tokens) are
applied here from the cache's own bookkeeping, so the model's mask is not built.

`install(model)` routes the model module's attention through here for `RowsCache`; any
other cache (and a plain forward without one) passes straight through to mlx-lm. This
module knows nothing of trees.
"""

from __future__ import annotations

import sys

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache

PATCHED = "_lloom_rows_attention"


class RowsCache:
    """One layer's cache: an optional prefix (kv_heads, P, head_dim) shared by all rows,
    then each row's own tokens in `rows`, left-padded by `padding[i]`. Positions (for
    RoPE) count the prefix."""

    def __init__(
        self,
        rows: BatchKVCache,
        padding: list[int],
        prefix: tuple[mx.array, mx.array] | None = None,
    ):
        self.rows = rows
        self.padding = padding
        self.prefix = prefix

    @property
    def offset(self) -> mx.array:
        return self.rows.offset + (self.prefix[0].shape[1] if self.prefix else 0)

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
    if mx.default_device() != mx.cpu:
        return False
    module = sys.modules.get(type(model).__module__)
    original = getattr(module, "scaled_dot_product_attention", None)
    if original is None:
        return False
    if getattr(original, PATCHED, False):
        return True

    def routed(queries, keys, values, cache, scale, mask, sinks=None):
        if not isinstance(cache, RowsCache):
            return original(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks)
        if sinks is not None:
            raise ValueError("attention sinks are not supported by the rows attention")
        return attention(queries, keys, values, cache, scale)

    setattr(routed, PATCHED, True)
    module.scaled_dot_product_attention = routed
    return True


def attention(queries, keys, values, cache: RowsCache, scale: float) -> mx.array:
    """Softmax attention of queries (B, Hq, T, D) over the shared prefix and then each
    row's own keys (B, Hkv, S, D), the last T of which are the queries' own tokens."""
    batch, q_heads, steps, dim = queries.shape
    kv_heads = keys.shape[1]
    rows = (q_heads // kv_heads) * steps  # query rows per kv head: grouped heads x steps
    q = (queries * scale).reshape(batch, kv_heads, rows, dim)
    own = q @ keys.swapaxes(-1, -2)  # (B, Hkv, rows, S)
    parts = [own]
    if cache.prefix is not None:
        prefix_keys, prefix_values = cache.prefix
        flat = q.transpose(1, 0, 2, 3).reshape(kv_heads, batch * rows, dim)
        parts.append(flat @ prefix_keys.swapaxes(-1, -2))  # (Hkv, B*rows, P)
    mx.eval(*parts)
    views = [_shared_view(part) for part in parts]
    _mask(views[0].reshape(batch, kv_heads, -1, steps, keys.shape[2]), cache.padding)
    if len(views) > 1:  # the prefix's scores seen as (B, Hkv, rows, P)
        views[1] = views[1].reshape(kv_heads, batch, rows, -1).transpose(1, 0, 2, 3)
    totals = _exp_in_place(views)
    out = own @ values  # (B, Hkv, rows, D); `own` now holds the weights
    if cache.prefix is not None:
        shared = parts[1] @ prefix_values  # (Hkv, B*rows, D)
        out = out + shared.reshape(kv_heads, batch, rows, dim).transpose(1, 0, 2, 3)
    out = out / mx.array(totals)
    return out.reshape(batch, q_heads, steps, dim).astype(queries.dtype)


def _shared_view(scores: mx.array) -> np.ndarray:
    """A numpy view of an evaluated MLX array's own memory: what numpy writes, MLX reads."""
    view = np.asarray(scores)
    assert not view.flags.owndata and view.flags.writeable, "numpy copied the scores"
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


def _exp_in_place(parts: list[np.ndarray]) -> np.ndarray:
    """exp(score - row max) over the joined parts, in place; returns the row totals."""
    top = parts[0].max(axis=-1, keepdims=True)
    for part in parts[1:]:
        np.maximum(top, part.max(axis=-1, keepdims=True), out=top)
    totals = np.zeros_like(top)
    for part in parts:
        np.subtract(part, top, out=part)
        np.exp(part, out=part)
        totals += part.sum(axis=-1, keepdims=True)
    return totals
