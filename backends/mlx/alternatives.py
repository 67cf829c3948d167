"""The model's alternatives at every position of a text, on the MLX backend.

For a story's token ids, what the model offered at each position: the log-probability
of the token that is there and the top-k it ranked there, so a page can show a token's
alternatives and branch the loom from one. The KV of the text before the first position
asked comes from the backend's fragment tree; the positions asked run once, in chunks,
reading every position's logits (the search's forward reads only the last). Their KV is
not filed: the search files the story's own.

Owns that one computation; `backends.mlx.backend` owns the model, the tree and the worker thread
this runs on (`MLXBackend.alternatives`).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import KVCache

from backends.base import Candidate, TokenAlternatives, Usage, token_texts
from backends.errors import BackendError
from backends.mlx.kv_tree import FragmentTree
from backends.mlx.numpy_views import writable
from backends.mlx.ranking import ranked

LEAD = 4  # tokens decoded before the first position, so a character split there is whole


def token_alternatives(
    model, tree: FragmentTree, pieces: list[bytes], ids: list[int], k: int, start: int, chunk: int
) -> tuple[list[TokenAlternatives], Usage]:
    """Alternatives at positions start..len(ids)-1 (each given the ids before it).

    Runs on the MLX worker thread. Returns them with what the forwards cost.
    """
    if not 1 <= start < len(ids):
        raise BackendError(
            f"positions {start}..{len(ids) - 1} hold no token with text before it", backend="mlx"
        )
    # Logits at position j predict ids[j + 1]: run ids[reuse : len - 1] after cached KV.
    match = tree.match(ids[: start - 1])
    reuse = match.length
    # A plain cache for every layer, windowed ones too: the model's masks apply windows.
    cache = [KVCache() for _ in model.layers]
    if reuse:
        keys, values = tree.gather(match, reuse)  # (layers, kv_heads, reuse, head_dim)
        for layer, layer_cache in enumerate(cache):
            layer_cache.keys = keys[layer : layer + 1]  # by name: mlx-lm's `state` tuples
            layer_cache.values = values[layer : layer + 1]  # change between releases
            layer_cache.offset = reuse
    k = min(k, len(pieces))
    lead = max(0, start - LEAD)
    texts = iter(token_texts([pieces[i] for i in ids[lead:]], start - lead))
    rows: list[TokenAlternatives] = []
    usage = Usage()
    for begin in range(reuse, len(ids) - 1, chunk):
        end = min(begin + chunk, len(ids) - 1)
        rows += _chunk(model, cache, pieces, ids, begin, end, k, start, texts)
        usage += Usage(forward_calls=1, model_tokens=end - begin, prefill_tokens=end - begin)
    return rows, usage


def _chunk(model, cache, pieces, ids, begin, end, k, start, texts) -> list[TokenAlternatives]:
    """Run ids[begin:end]; the alternatives for positions begin+1..end that are >= start."""
    inputs = mx.array([ids[begin:end]])
    following = np.array(ids[begin + 1 : end + 1])  # (T,): the token each position predicts
    try:
        logits = model(inputs, cache=cache)[0].astype(mx.float32)  # (T, vocab)
        mx.eval(logits)
        # most likely first; a vocabulary padded past the tokenizer's offers only real tokens
        order, picked, own = ranked(writable(logits)[:, : len(pieces)], k, also=following)
    except (RuntimeError, ValueError) as e:
        raise BackendError(f"the model failed on this input: {e}", backend="mlx") from e
    rows = []
    for offset, (top_ids, top_lps, lp) in enumerate(
        zip(order.tolist(), picked.tolist(), own.tolist(), strict=True)
    ):
        position = begin + 1 + offset
        if position < start:
            continue
        top = [
            Candidate(i, pieces[i].decode("utf-8", errors="replace"), p, pieces[i])
            for i, p in zip(top_ids, top_lps, strict=True)
        ]
        rows.append(TokenAlternatives(position, ids[position], next(texts), lp, top))
    return rows
