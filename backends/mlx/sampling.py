"""Samples for ramify: n rows drawn together over a context's cached KV.

`draw` feeds the context's last token to n rows over its cached prefix (read from the
fragment tree once and shared by the rows, as a search's depth shares it), then each
row's draw, one batched forward per drawn token, until every row has ended; each
sample's KV is filed in the tree, so that accepting a sample and searching on from it
costs no prefill. `pick_tokens` is the draw itself (min-p, then temperature).

Runs on the MLX worker (`backends.mlx.worker`); the caches and prefill are `forward`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mlx.core as mx

from backends.base import Usage
from backends.mlx.batching import Forward, usage_of
from backends.mlx.forward import Net, batch_cache, model_errors, prefill
from backends.mlx.kv_disk import DiskKV
from backends.mlx.kv_tree import FragmentTree


@dataclass(eq=False)
class Drawing:
    """One row of a sampling run: its tokens so far and, once it has ended, how many of
    them the model was fed (their KV is in the batch: all but a last token drawn at the
    length limit)."""

    tokens: list[int] = field(default_factory=list)
    logprob: float = 0.0
    fed: int | None = None

    def take(self, token: int, logprob: float, control: bool, max_tokens: int) -> None:
        if self.fed is not None:
            return
        if control:  # a control token ends the sample and is not part of it
            self.fed = len(self.tokens)
            return
        self.tokens.append(token)
        self.logprob += logprob
        if len(self.tokens) == max_tokens:
            self.fed = max_tokens - 1


@dataclass(frozen=True)
class Draw:
    """What to draw: n samples of at most max_tokens after a context."""

    n: int
    temperature: float
    min_p: float
    max_tokens: int
    seed: int


def draw(
    net: Net,
    tree: FragmentTree,
    ids: tuple[int, ...],
    how: Draw,
    *,
    special: frozenset[int],
    chunk: int,
    disk: DiskKV | None,
) -> tuple[list[Drawing], Usage]:
    """Feed the context's last token to n rows over its cached prefix, then each row's
    draw, one batched forward per step, until every row has ended (a `special` token or
    `max_tokens` ends a row)."""
    ran: list[Forward] = []
    prefix = ids[:-1]
    if tree.match(list(prefix)).length < len(prefix):
        prefill(net, tree, prefix, 1, chunk=chunk, disk=disk, keep=True, ran=ran)
    usage = usage_of(ran)
    match = tree.match(list(prefix))
    n = how.n
    cache, start = batch_cache(net, tree, [match] * n, [len(prefix)] * n, how.max_tokens)
    rows = [Drawing() for _ in range(n)]
    inputs = mx.array([[ids[-1]]] * n)  # (n, 1)
    key = mx.random.key(how.seed)
    for _ in range(how.max_tokens):
        key, step_key = mx.random.split(key)
        tokens, logprobs = _draw_step(net, inputs, cache, how, step_key)
        usage += Usage(forward_calls=1, model_tokens=n)
        for row, token, logprob in zip(rows, tokens, logprobs, strict=True):
            row.take(token, logprob, token in special, how.max_tokens)
        if all(row.fed is not None for row in rows):
            break
        inputs = mx.array([[t] for t in tokens])
    _file_draws(tree, ids, rows, cache, start)
    tree.evict()
    return rows, usage


def _draw_step(net: Net, inputs, cache, how: Draw, key) -> tuple[list[int], list[float]]:
    """One forward of every row's last token; each row's drawn token and its raw log-prob."""
    with model_errors():
        logits = net.model(inputs, cache=cache)[:, -1, : net.vocab]
        logits = logits.astype(mx.float32)  # (n, vocab)
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        tokens = pick_tokens(logprobs, how.temperature, how.min_p, key)  # (n,)
        chosen = mx.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
        mx.eval(tokens, chosen)
    return tokens.tolist(), chosen.tolist()


def _file_draws(tree: FragmentTree, ids, rows: list[Drawing], cache, start: int) -> None:
    """File each row's fed tokens (the context's last, then its draw) under the context."""
    longest = 1 + max(row.fed for row in rows)
    keys = mx.stack([c.keys[:, :, start : start + longest] for c in cache])
    values = mx.stack([c.values[:, :, start : start + longest] for c in cache])
    for i, row in enumerate(rows):  # each its own array, so none pins the whole batch
        row_keys = mx.contiguous(keys[:, i, :, : 1 + row.fed])
        row_values = mx.contiguous(values[:, i, :, : 1 + row.fed])
        mx.eval(row_keys, row_values)
        path = list(ids) + row.tokens[: row.fed]
        tree.insert(path, len(ids) - 1, row_keys, row_values, None)


def pick_tokens(logprobs: mx.array, temperature: float, min_p: float, key: mx.array) -> mx.array:
    """(rows, vocab) raw log-probs -> (rows,) drawn ids: tokens below min_p times the top
    token's probability are dropped, the rest drawn at `temperature` (0: the top token)."""
    if temperature == 0:
        return mx.argmax(logprobs, axis=-1)
    if min_p > 0:
        floor = mx.max(logprobs, axis=-1, keepdims=True) + math.log(min_p)
        logprobs = mx.where(logprobs >= floor, logprobs, -mx.inf)
    return mx.random.categorical(logprobs / temperature, axis=-1, key=key)
