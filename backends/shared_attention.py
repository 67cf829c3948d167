"""Attention over a prefix that every row of a batch shares, read once instead of copied.

A search's depth runs many beams that all continue one story. Copying the story's KV
into every row costs memory traffic that grows with beams x story length (about 1 s per
depth for 25 beams over 1,500 tokens here) and the attention then reads every copy.
`SharedPrefixCache` holds the story's KV once, for all rows, and each row's own tokens in
a left-padded `BatchKVCache`; `attention` scores the queries against both parts and
softmaxes them together, which is exactly attention over the joined keys.

`install(model)` routes the model module's attention through here; any other cache
passes straight through to mlx-lm's own function. This module knows nothing of trees.
"""

from __future__ import annotations

import sys

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache

PATCHED = "_lloom_shared_prefix"


class SharedPrefixCache:
    """One layer's cache: prefix KV (kv_heads, P, head_dim) shared by all rows, then each
    row's suffix in `suffix`. Positions (for RoPE) count the prefix."""

    def __init__(self, prefix_keys: mx.array, prefix_values: mx.array, suffix: BatchKVCache):
        self.prefix_keys = prefix_keys
        self.prefix_values = prefix_values
        self.suffix = suffix

    @property
    def offset(self) -> mx.array:
        return self.suffix.offset + self.prefix_keys.shape[1]

    @property
    def keys(self) -> mx.array:
        return self.suffix.keys

    @property
    def values(self) -> mx.array:
        return self.suffix.values

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        return self.suffix.update_and_fetch(keys, values)

    def make_mask(self, N: int, **kwargs) -> mx.array:
        """The suffix's causal, left-padding-aware mask; the prefix is visible to all."""
        return self.suffix.make_mask(N, return_array=True)


def install(model) -> bool:
    """Route `model`'s attention through `attention`; False where its module has no hook."""
    module = sys.modules.get(type(model).__module__)
    original = getattr(module, "scaled_dot_product_attention", None)
    if original is None:
        return False
    if getattr(original, PATCHED, False):
        return True

    def routed(queries, keys, values, cache, scale, mask, sinks=None):
        if isinstance(cache, SharedPrefixCache) and sinks is None:
            return attention(queries, keys, values, cache, scale, mask)
        return original(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks)

    setattr(routed, PATCHED, True)
    module.scaled_dot_product_attention = routed
    return True


def attention(queries, keys, values, cache: SharedPrefixCache, scale: float, mask) -> mx.array:
    """Softmax attention of queries (B, Hq, T, D) over prefix + each row's keys (B, Hkv, S, D)."""
    batch, q_heads, steps, dim = queries.shape
    kv_heads = keys.shape[1]
    group = q_heads // kv_heads
    prefix = cache.prefix_keys.shape[1]
    q = (queries * scale).reshape(batch, kv_heads, group, steps, dim)
    # Prefix: every row's queries against the one shared copy: (Hkv, B*G*T, P).
    rows = batch * group * steps
    flat = q.transpose(1, 0, 2, 3, 4).reshape(kv_heads, rows, dim)
    prefix_scores = flat @ cache.prefix_keys.swapaxes(-1, -2)
    prefix_scores = prefix_scores.reshape(kv_heads, batch, group, steps, prefix)
    prefix_scores = prefix_scores.transpose(1, 0, 2, 3, 4)  # (B, Hkv, G, T, P)
    # Suffix: each row against its own keys: (B, Hkv, G, T, S).
    own_scores = q @ keys[:, :, None].swapaxes(-1, -2)
    if mask is not None:
        hidden = mx.array(mx.finfo(own_scores.dtype).min, own_scores.dtype)
        own_scores = mx.where(mask[:, :, None], own_scores, hidden)
    weights = mx.softmax(
        mx.concatenate([prefix_scores, own_scores], axis=-1), axis=-1, precise=True
    )
    prefix_weights, own_weights = weights[..., :prefix], weights[..., prefix:]
    prefix_out = prefix_weights.transpose(1, 0, 2, 3, 4).reshape(kv_heads, rows, prefix)
    prefix_out = (prefix_out @ cache.prefix_values).reshape(kv_heads, batch, group, steps, dim)
    out = prefix_out.transpose(1, 0, 2, 3, 4) + own_weights @ values[:, :, None]
    return out.reshape(batch, q_heads, steps, dim).astype(queries.dtype)
