"""The local backend: an mlx-lm model in this process, with a KV fragment tree.

A context's cache is assembled from the fragment tree (`backends.mlx.kv_tree`); only the
tokens the tree lacks are run. A search's depth arrives as many contexts that each add
one token to a cached prefix: they run as one batched forward over a left-padded
`BatchKVCache`, and each row's new KV is filed under its own node. Longer tails (a new
or edited story) are prefilled in chunks (`read_ahead` runs them one worker call each,
so a page can show how far a long story has been read). Accepting a suggestion appends
ids whose KV the tree already holds, so it costs no prefill. All MLX work runs on one
worker thread of the backend's own, so MLX arrays stay on the thread (and stream) that
made them; the depths that page sessions ask at about the same time are joined into one
forward there (`backends.mlx.batching`).
On CPU every forward's attention is `backends.mlx.attention`'s (BLAS matmuls, numpy's
vectorised softmax, the story's KV read once for all rows).

On a CPU the model reads at most `CPU_READ_WINDOW` tokens of a context's end by default
(`read_window`): reading runs at a few hundred tokens a second there, and a window of
that size opens a long story in seconds. A context read at length is kept on disk
(`backends.mlx.kv_disk`, when the backend is given a folder) and a later backend, after a
restart, takes its KV from there instead of reading it again.

Sampling (`sample`, for ramify) feeds n rows over the context's cached KV, shared as a
search's depth shares it, one batched forward per drawn token, and files every sample's
KV in the tree.

Owns: loading (the embedded model is converted by `backends.embedded`), tokens and
their bytes, forwards, sampling and the cache. Does not own: the search.
"""

from __future__ import annotations

import logging
import math
import queue
import secrets
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache

from backends.base import (
    Backend,
    BackendError,
    Cancelled,
    Candidate,
    Continuation,
    TokenAlternatives,
    Usage,
)
from backends.mlx.alternatives import token_alternatives
from backends.mlx.attention import RowsCache, SharedPrefix, install
from backends.mlx.batching import Batcher, Forward, always, usage_of
from backends.mlx.head import last_logits
from backends.mlx.kv_disk import DiskKV, model_fingerprint
from backends.mlx.kv_tree import FragmentTree, Match, shared_prefix
from backends.mlx.loading import load_checked
from backends.mlx.numpy_views import writable
from backends.mlx.ranking import ranked
from backends.mlx.swiglu import install as install_swiglu
from backends.mlx.weights import ModelInfo, prepare

log = logging.getLogger(__name__)

# The most tokens of a story's end the model reads on a CPU unless told otherwise. On two
# loaded cores the embedded model read 1,024 tokens in 6.2 s (load ~4) and 2,048 in 12.8 s,
# a search taking 2.5-3 s more: 1,024 keeps a first open with its search near 10 s on a
# busy machine and well under it on a quiet one (bench/bench_long.py).
CPU_READ_WINDOW = 1024
KEEP_AT_LEAST = 256  # a prefill of fewer new tokens than this is not worth a file
RESTORE_AT_LEAST = 32  # stored KV is read back only when it spares this many tokens


@dataclass(frozen=True)
class _Row:
    """One context to answer: reuse `reuse` tokens of cache, run the rest."""

    ids: tuple[int, ...]
    match: Match
    reuse: int

    @property
    def tail(self) -> int:
        return len(self.ids) - self.reuse


class MLXBackend(Backend):
    """mlx-lm in-process. `model_path` is an mlx-lm folder."""

    name = "mlx"

    def __init__(
        self,
        model_path: Path | str,
        *,
        display_name: str | None = None,
        kv_cache_bytes: int = 1 << 30,
        prefill_chunk: int = 512,
        rows_attention: bool = True,
        batch_window: float = 0.02,
        dequantize_bytes: int = 4 << 30,
        read_window: int | None = None,
        kv_disk: Path | None = None,
        kv_disk_bytes: int = 0,
    ):
        """`model_path`: an mlx-lm folder or hub id (`backends.mlx.loading`);
        `rows_attention=False` keeps mlx-lm's own attention (for comparisons);
        `batch_window`: seconds a forward may wait for the other sessions of the last
        batch to ask again, so that their rows join it (`backends.mlx.batching`);
        `dequantize_bytes`: the most float32 weights made at load from quantized or
        half-precision ones on CPU (`backends.mlx.weights`); `read_window`: the most
        tokens of a context's end the model reads (None: `CPU_READ_WINDOW` on a CPU, the
        model's whole window elsewhere; 0: the whole window); `kv_disk`: a folder to keep
        long contexts' KV in, at most `kv_disk_bytes` (None or 0: nothing is kept)."""
        super().__init__()
        self._worker = MLXWorker()
        try:
            loaded = self._worker.submit(load_checked, str(model_path)).result()
        except BackendError:
            self._worker.stop()
            raise
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.model_path = loaded.folder
        hub_id = self.model_path != Path(model_path).expanduser()
        self._display_name = display_name or (str(model_path) if hub_id else self.model_path.name)
        job = (self.model, self._display_name, dequantize_bytes)
        self.info: ModelInfo = self._worker.submit(prepare, *job).result()
        log.info("MLX model %s: %s", self._display_name, self.info.note)
        self.prefill_chunk = prefill_chunk
        self.tree = FragmentTree(kv_cache_bytes)
        self._forwards: list[Forward] = []  # what the call in progress ran (worker thread)
        self._batcher = Batcher(self._worker.submit, self._call, batch_window)
        self._callers = threading.local()  # each calling thread's `cancellable` check
        self._pieces = token_pieces(self.tokenizer)
        self.special_token_ids = frozenset(self.tokenizer.all_special_ids)
        self._context_length = loaded.config.get("max_position_embeddings")
        self._pieces_count = len(self._pieces)
        # ids the model embeds and the tokenizer names: any other id is refused
        self.vocab_size = min(self._pieces_count, _embedding_rows(self.model))
        self._kv_shape = _kv_shape(self.model)
        # Our attention ignores the model's masks: a model whose layers attend within a
        # window keeps mlx-lm's, which reads the window from the batch cache's mask.
        self._rows_attention = rows_attention and not loaded.sliding and install(self.model)
        install_swiglu(self.model)  # module-wide: every forward of this architecture
        grouped = type(self.model).__module__ == "mlx_lm.models.gemma2"
        grouped = grouped and self._kv_shape[1] < self.model.args.num_attention_heads
        self._cache_class = GroupedBatchKVCache if grouped else BatchKVCache
        self._dtype = _activation_dtype(self.model)
        if read_window is None and mx.default_device() == mx.cpu:
            read_window = CPU_READ_WINDOW
        self._read_window = read_window or None
        self._disk = None
        if kv_disk is not None and kv_disk_bytes > 0:
            fingerprint = model_fingerprint(self.model_path, self._kv_shape, str(self._dtype))
            self._disk = DiskKV(Path(kv_disk).expanduser(), fingerprint, kv_disk_bytes)

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._display_name

    @property
    def model_facts(self) -> str:
        return self.info.facts

    @property
    def note(self) -> str | None:
        """The page says so when the weights run slowly (kept quantized: over the budget)."""
        return self.info.note if self.info.slow else None

    @property
    def context_length(self) -> int | None:
        return self._context_length

    @property
    def heal_k(self) -> int:
        """The whole vocabulary: a healed depth keeps every allowed token, exactly."""
        return self._pieces_count

    @property
    def read_window(self) -> int | None:
        """The model's window, or `read_window` tokens where that is less (see __init__)."""
        if self._read_window is None or self._context_length is None:
            return self._read_window or self._context_length
        return min(self._read_window, self._context_length)

    def tokenize(self, text: str) -> list[int]:
        try:
            # A writer's text is text: "<|im_start|>" in it is characters, not a control token.
            return list(
                self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
            )
        except (TypeError, ValueError) as e:  # e.g. a lone surrogate the tokenizer refuses
            raise BackendError(f"cannot tokenize this text: {e}", backend=self.name) from e

    def detokenize(self, ids: list[int]) -> str:
        self.check_ids(ids)
        return self.tokenizer.decode(list(ids))

    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        if any(not ctx for ctx in contexts):
            raise BackendError("an empty context has no next token", backend=self.name)
        for context in contexts:
            self.check_ids(context)
        background = getattr(self._callers, "background", False)
        request = self._batcher.ask(
            {tuple(c) for c in contexts}, k, self._wanted(), background=background
        )
        answers, usage = request.result()
        self.stats.add(**usage.__dict__)  # counted on the caller's thread, for its search
        return [answers[tuple(ctx)] for ctx in contexts]

    def read_ahead(self, context: list[int], k: int, report: Callable[[int, int], None]) -> None:
        """Prefill a context one chunk per worker call, reporting after each; the last
        chunk leaves the context's top-k cached for the search's first step. A tail of
        one chunk or less is left to the search: there is no progress to show."""
        self.check_ids(context)
        ids = tuple(context)
        done = self._worker.submit(self._restore, ids).result()
        if len(ids) - done <= self.prefill_chunk:
            return
        wanted = self._wanted()
        while done < len(ids):
            if not wanted():
                raise Cancelled(f"reading stopped after {done} of {len(ids)} tokens")
            done = min(done + self.prefill_chunk, len(ids))
            # only the whole context is kept on disk, not each chunk on the way to it
            job = ({ids[:done]}, k, False, done == len(ids))
            _, forwards = self._worker.submit(self._call, *job).result()
            self.stats.add(**usage_of(forwards).__dict__)
            report(done, len(ids))

    def alternatives(
        self, ids: list[int], k: int, *, start: int = 1
    ) -> list[TokenAlternatives] | None:
        """The cached KV before `start`, then one forward over the rest reading every
        position (`backends.mlx.alternatives`)."""
        self.check_ids(ids)
        job = (self.model, self.tree, self._pieces, list(ids), k, start, self.prefill_chunk)
        rows, usage = self._worker.submit(token_alternatives, *job).result()
        self.stats.add(**usage.__dict__)
        return rows

    @contextmanager
    def cancellable(self, wanted: Callable[[], bool]):
        """Within this block, this thread's reads and searches stop with `Cancelled`
        between chunks and between depths once wanted() is False (the page session that
        asked is gone or has asked for something else), leaving the model to the others.
        wanted() is also called on the worker thread: it must be cheap and thread-safe."""
        previous = getattr(self._callers, "wanted", None)
        self._callers.wanted = wanted
        try:
            yield
        finally:
            self._callers.wanted = previous

    @contextmanager
    def background(self, wanted: Callable[[], bool]):
        """Within this block, this thread's searches are look-ahead's: each depth waits
        for every writer's (`backends.mlx.batching`), stops with `Cancelled` once wanted()
        is False, and the KV it files is the first the cap drops (`backends.mlx.kv_tree`)."""
        with self.cancellable(wanted):
            self._callers.background = True
            try:
                yield
            finally:
                self._callers.background = False

    def searching(self):
        """Within this block, this thread's search is a writer's (unless it is look-ahead's,
        in `background`): no look-ahead depth runs until it ends (`backends.mlx_batching`)."""
        if getattr(self._callers, "background", False):
            return nullcontext()
        return self._batcher.searching()

    @property
    def cache_bytes(self) -> int:
        """Bytes of KV the fragment tree holds now (at most `cache_cap_bytes` between calls)."""
        return self.tree.nbytes

    @property
    def cache_cap_bytes(self) -> int:
        return self.tree.max_bytes

    def _wanted(self) -> Callable[[], bool]:
        return getattr(self._callers, "wanted", None) or always

    def close(self) -> None:
        if not self._worker.stopped:
            self._worker.submit(self.tree.clear).result()
            self._worker.stop()
        if self._disk is not None:
            self._disk.close()

    def _call(
        self, contexts: set[tuple[int, ...]], k: int, background: bool = False, keep: bool = True
    ) -> tuple[dict, list[Forward]]:
        """Answer `contexts` (`keep`: a context read at length may be kept on disk)."""
        self._forwards = []
        self.tree.ahead = background
        try:
            answers = self._answer(contexts, k, keep=keep and not background)
        finally:
            self.tree.ahead = False
        self.tree.evict()
        return answers, self._forwards

    # -- planning --------------------------------------------------------------------
    def _answer(self, contexts: set[tuple[int, ...]], k: int, *, keep: bool) -> dict:
        """Cached answers first, then prefills one by one, then one batched step for the rest."""
        answers: dict[tuple[int, ...], list[Candidate]] = {}
        pending = []
        for ids in sorted(contexts):
            row = self._plan(ids, k)
            if row.tail == 0:
                answers[ids] = row.match.top[:k]
            elif row.tail == 1 and row.reuse > 0:
                pending.append(ids)
            else:
                answers[ids] = self._prefill(ids, k, keep=keep)
        steps = []
        for ids in pending:  # planned again: a prefill may have split the nodes they use
            row = self._plan(ids, k)
            if row.tail == 0:
                answers[ids] = row.match.top[:k]
            else:
                steps.append(row)
        if steps:
            answers.update(self._step(steps, k))
        return answers

    def _plan(self, ids: tuple[int, ...], k: int) -> _Row:
        match = self.tree.match(list(ids))
        top = match.top
        if match.length == len(ids) and top is not None and len(top) >= k:
            return _Row(ids, match, len(ids))
        return _Row(ids, match, min(match.length, len(ids) - 1))

    # -- running ---------------------------------------------------------------------
    def _prefill(self, ids: tuple[int, ...], k: int, *, keep: bool = True) -> list[Candidate]:
        """Run a context's uncached tail in chunks, after what the disk holds of it; file
        each chunk as a fragment; keep a context read at length on disk (`keep`)."""
        top: list[Candidate] = []
        self._restore(ids)
        row = self._plan(ids, k)
        if row.tail == 0:  # the disk held it all, with its candidates
            return row.match.top[:k]
        start = row.reuse
        while start < len(ids):
            end = min(start + self.prefill_chunk, len(ids))
            match = self.tree.match(list(ids[:start]))
            [top], keys, values = self._forward([ids[:end]], [match], [start], k)
            last = end == len(ids)
            self.tree.insert(list(ids[:end]), start, keys[0], values[0], top if last else None)
            self._forwards.append(Forward((ids,), end - start, prefill=True))
            start = end
        if keep and top:
            self._keep(ids, top)
        return top

    # -- the disk (backends.mlx.kv_disk) -------------------------------------------------
    def _restore(self, ids: Sequence[int]) -> int:
        """File in the tree what the disk holds of `ids` beyond what the tree holds;
        return how many leading ids the tree then holds."""
        held = self.tree.match(list(ids)).length
        if self._disk is None or len(ids) - held < RESTORE_AT_LEAST:
            return held
        stored = self._disk.load(ids, more_than=held + RESTORE_AT_LEAST - 1)
        if stored is None:
            return held
        top = None
        if stored.top_ids is not None:
            top = self._candidates(list(stored.top_ids), list(stored.top_logprobs))
        keys, values = (_from_numpy(a, stored.dtype) for a in (stored.keys, stored.values))
        self.tree.insert(list(stored.ids), 0, keys, values, top)
        return len(stored.ids)

    def _keep(self, ids: tuple[int, ...], top: list[Candidate]) -> None:
        """Hand the context's KV to the disk when the disk lacks KEEP_AT_LEAST of it."""
        if self._disk is None or len(ids) - self._disk.covered(ids) < KEEP_AT_LEAST:
            return
        keys, values = self.tree.gather(self.tree.match(list(ids)), len(ids))
        dtype = str(keys.dtype).rsplit(".", 1)[-1]
        best = ([c.token_id for c in top], [c.logprob for c in top])
        self._disk.keep(ids, _to_numpy(keys), _to_numpy(values), dtype, best)

    def _step(self, rows: list[_Row], k: int) -> dict:
        """One batched forward: every row adds its last token to a cached prefix."""
        tops, keys, values = self._forward(
            [row.ids for row in rows], [row.match for row in rows], [row.reuse for row in rows], k
        )
        for row, top, row_keys, row_values in zip(rows, tops, keys, values, strict=True):
            self.tree.insert(list(row.ids), row.reuse, row_keys, row_values, top)
        self._forwards.append(Forward(tuple(row.ids for row in rows), 1, prefill=False))
        return {row.ids: top for row, top in zip(rows, tops, strict=True)}

    def _forward(self, contexts, matches, reuses, k):
        """Run contexts[i][reuses[i]:] (equal lengths) after their cached prefixes.

        Returns each row's top-k after its last token, and the new tokens' KV per row as
        (layers, kv_heads, new_tokens, head_dim) arrays.
        """
        new = len(contexts[0]) - reuses[0]
        inputs = mx.array([list(ctx[reuse:]) for ctx, reuse in zip(contexts, reuses, strict=True)])
        cache, width = self._batch_cache(matches, reuses, new)  # new tokens land at [width, +new)
        k = min(k, self._pieces_count)
        try:
            logits = last_logits(self.model, inputs, cache).astype(mx.float32)  # (B, vocab)
            # Each row's new KV as its own array, so no fragment pins the whole batch.
            new_keys = mx.stack([c.keys[:, :, width : width + new] for c in cache])
            new_values = mx.stack([c.values[:, :, width : width + new] for c in cache])
            row_keys = [mx.contiguous(new_keys[:, i]) for i in range(len(contexts))]
            row_values = [mx.contiguous(new_values[:, i]) for i in range(len(contexts))]
            mx.eval(logits, *row_keys, *row_values)
            # A vocabulary padded past the tokenizer's (Qwen's) offers only real tokens.
            order, picked, _ = ranked(writable(logits)[:, : self._pieces_count], k)
        except (RuntimeError, ValueError) as e:
            raise BackendError(f"the model failed on this input: {e}", backend=self.name) from e
        pairs = zip(order.tolist(), picked.tolist(), strict=True)
        tops = [self._candidates(o, p) for o, p in pairs]
        return tops, row_keys, row_values

    def _batch_cache(self, matches: list[Match], reuses: list[int], new: int) -> tuple:
        """Per-layer caches holding each row's joined fragments, left-padded, and where in
        them the new tokens land.

        With `backends.mlx.attention` installed, fragments that a run of rows all hold (their
        story: rows come sorted by ids, so a story's rows are adjacent) stay one shared
        copy per run; the rest is joined per row in a `BatchKVCache`, with `new` spare
        slots at the end so the forward writes in place instead of growing (and so
        copying) the arrays.
        """
        prefixes, shares = (
            self._shared_prefixes(matches, reuses)
            if self._rows_attention
            else ([], [0] * len(matches))
        )
        own = [reuse - share for reuse, share in zip(reuses, shares, strict=True)]
        width = max(own)
        padding = [width - n for n in own]
        keys, values = [], []
        for match, reuse, share, pad in zip(matches, reuses, shares, padding, strict=True):
            kv = self.tree.gather(match, reuse, start=share)
            keys.append(self._pad(kv[0] if kv else None, pad, new))
            values.append(self._pad(kv[1] if kv else None, pad, new))
        keys = mx.stack(keys, axis=1)  # (layers, B, kv_heads, width + new, head_dim)
        values = mx.stack(values, axis=1)
        offsets, lengths = mx.array(own), mx.array(shares)
        caches = []
        for layer in range(keys.shape[0]):
            # `a[layer, ...]`, not `a[layer]`: MLX (0.32) copies on a lone integer index,
            # which here would copy the whole story's KV at every forward.
            cache = self._cache_class(padding)  # its fields set by name: `state`'s tuple grew in
            cache.keys, cache.values = keys[layer, ...], values[layer, ...]  # mlx-lm 0.32.2
            cache.offset, cache._idx = offsets, width
            if self._rows_attention:
                shared = [
                    SharedPrefix(
                        start, end, [k[layer, ...] for k, _ in kv], [v[layer, ...] for _, v in kv]
                    )
                    for start, end, kv in prefixes
                ]
                cache = RowsCache(cache, padding, shared, lengths)
            caches.append(cache)
        return caches, width

    def _shared_prefixes(self, matches: list[Match], reuses: list[int]):
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
                match = self.tree.join(run[0], length) if end - start > 1 else run[0]
                prefixes.append((start, end, self.tree.segments(match, length)))
                shares[start:end] = [length] * (end - start)
            start = end
        return prefixes, shares

    def _pad(self, kv: mx.array | None, left: int, spare: int) -> mx.array:
        """(layers, kv_heads, n, head_dim) -> left zeros, the fragments, spare zeros."""
        layers, heads, head_dim = self._kv_shape
        parts = [mx.zeros((layers, heads, left, head_dim), dtype=self._dtype)] if left else []
        if kv is not None:
            parts.append(kv)
        parts.append(mx.zeros((layers, heads, spare, head_dim), dtype=self._dtype))
        return mx.concatenate(parts, axis=2)

    def _candidates(self, ids: list[int], logprobs: list[float]) -> list[Candidate]:
        return [
            Candidate(i, self._pieces[i].decode("utf-8", errors="replace"), lp, self._pieces[i])
            for i, lp in zip(ids, logprobs, strict=True)
        ]

    # -- sampling (ramify) -------------------------------------------------------------
    def sample(self, context, *, n, temperature, min_p, max_tokens, seed=None):
        """All n samples in one batched run on the worker: the story's KV comes from the
        fragment tree (read once, shared by the rows), each step is one forward for every
        row, and each sample's KV is filed in the tree, so that accepting a sample and
        searching on from it costs no prefill."""
        if not context:
            raise BackendError("an empty context has no next token", backend=self.name)
        self.check_ids(context)
        seed = secrets.randbits(31) if seed is None else seed
        job = (tuple(context), n, temperature, min_p, max_tokens, seed)
        drawn, usage = self._worker.submit(self._draw, *job).result()
        self.stats.add(**usage.__dict__)
        return [Continuation(tuple(d.tokens), self.detokenize(d.tokens), d.logprob) for d in drawn]

    def _draw(self, ids, n, temperature, min_p, max_tokens, seed) -> tuple[list[_Drawing], Usage]:
        """Feed the context's last token to n rows over its cached prefix, then each row's
        draw, one batched forward per step, until every row has ended."""
        self._forwards = []
        prefix = ids[:-1]
        if self.tree.match(list(prefix)).length < len(prefix):
            self._prefill(prefix, 1)
        usage = usage_of(self._forwards)
        match = self.tree.match(list(prefix))
        cache, start = self._batch_cache([match] * n, [len(prefix)] * n, max_tokens)
        rows = [_Drawing() for _ in range(n)]
        inputs = mx.array([[ids[-1]]] * n)  # (n, 1)
        key = mx.random.key(seed)
        for _ in range(max_tokens):
            key, step_key = mx.random.split(key)
            tokens, logprobs = self._draw_step(inputs, cache, temperature, min_p, step_key)
            usage += Usage(forward_calls=1, model_tokens=n)
            for row, token, logprob in zip(rows, tokens, logprobs, strict=True):
                row.take(token, logprob, token in self.special_token_ids, max_tokens)
            if all(row.fed is not None for row in rows):
                break
            inputs = mx.array([[t] for t in tokens])
        self._file_draws(ids, rows, cache, start)
        self.tree.evict()
        return rows, usage

    def _draw_step(self, inputs, cache, temperature, min_p, key) -> tuple[list[int], list[float]]:
        """One forward of every row's last token; each row's drawn token and its raw log-prob."""
        try:
            logits = self.model(inputs, cache=cache)[:, -1, : self._pieces_count]
            logits = logits.astype(mx.float32)  # (n, vocab)
            logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
            tokens = pick_tokens(logprobs, temperature, min_p, key)  # (n,)
            chosen = mx.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
            mx.eval(tokens, chosen)
        except (RuntimeError, ValueError) as e:
            raise BackendError(f"the model failed on this input: {e}", backend=self.name) from e
        return tokens.tolist(), chosen.tolist()

    def _file_draws(self, ids, rows: list[_Drawing], cache, start: int) -> None:
        """File each row's fed tokens (the context's last, then its draw) under the context."""
        longest = 1 + max(row.fed for row in rows)
        keys = mx.stack([c.keys[:, :, start : start + longest] for c in cache])
        values = mx.stack([c.values[:, :, start : start + longest] for c in cache])
        for i, row in enumerate(rows):  # each its own array, so none pins the whole batch
            row_keys = mx.contiguous(keys[:, i, :, : 1 + row.fed])
            row_values = mx.contiguous(values[:, i, :, : 1 + row.fed])
            mx.eval(row_keys, row_values)
            path = list(ids) + row.tokens[: row.fed]
            self.tree.insert(path, len(ids) - 1, row_keys, row_values, None)


class GroupedBatchKVCache(BatchKVCache):
    """mlx-lm's gemma2 attends with its queries as (B, kv_heads, repeats, T, D) and applies
    the mask as given: a batch's (B, 1, T, S) mask needs one more axis to broadcast there
    (rows of different lengths otherwise fail)."""

    def make_mask(self, N: int, **kwargs):
        mask = super().make_mask(N, **kwargs)
        return mask[:, :, None] if isinstance(mask, mx.array) and mask.ndim == 4 else mask


def _stopped() -> BackendError:
    """What a job gets once the backend is closed (a look-ahead thread may still ask)."""
    return BackendError("the model was closed: its worker has stopped", backend="mlx")


class MLXWorker:
    """One thread that runs every MLX job, in order.

    It ends when asked or once the main thread has finished, and clears its MLX streams
    on the way out: MLX aborts the process at exit when a thread's streams outlive it.
    """

    POLL_SECONDS = 0.2

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        # Not a daemon, even when made from one (Streamlit's script threads are): shutdown
        # waits for it, and it clears its streams once the main thread has finished.
        self._thread = threading.Thread(target=self._run, name="lloom-mlx", daemon=False)
        self._thread.start()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        if self._stopping.is_set():
            future.set_exception(_stopped())
        else:
            self._jobs.put((future, fn, args))
        return future

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def stop(self) -> None:
        self._stopping.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.is_set() and threading.main_thread().is_alive():
            try:
                future, fn, args = self._jobs.get(timeout=self.POLL_SECONDS)
            except queue.Empty:
                continue
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as e:  # handed to the caller's thread
                    future.set_exception(e)
        self._stopping.set()
        while not self._jobs.empty():
            self._jobs.get_nowait()[0].set_exception(_stopped())
        mx.clear_streams()


def token_pieces(tokenizer) -> list[bytes]:
    """Every token's own bytes (a byte-level BPE token may be half a UTF-8 character)."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    vocab_size = max(len(hf), max(hf.get_vocab().values()) + 1)
    strings = hf.convert_ids_to_tokens(list(range(vocab_size)))
    decoder = _byte_decoder()
    pieces = []
    for token_id, token in enumerate(strings):
        if token is None:
            pieces.append(b"")
        elif token_id in hf.all_special_ids:
            pieces.append(token.encode("utf-8"))
        elif all(ch in decoder for ch in token):
            pieces.append(bytes(decoder[ch] for ch in token))
        else:
            pieces.append(hf.decode([token_id]).encode("utf-8"))
    return pieces


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable-unicode-to-byte table used by byte-level BPE vocabularies."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes, strict=True)}


def _kv_shape(model) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of the model's attention cache."""
    args = model.args
    heads = getattr(args, "num_key_value_heads", None) or args.num_attention_heads
    head_dim = getattr(args, "head_dim", None) or args.hidden_size // args.num_attention_heads
    return len(model.layers), heads, head_dim


def _embedding_rows(model) -> int:
    """How many token ids the model's embedding table has rows for."""
    return model.model.embed_tokens.weight.shape[0]


def _to_numpy(a: mx.array) -> np.ndarray:
    """A copy numpy can hold (bfloat16, which numpy lacks, as its raw 16-bit words)."""
    return np.array(a.view(mx.uint16) if a.dtype == mx.bfloat16 else a)


def _from_numpy(a: np.ndarray, dtype: str) -> mx.array:
    """`_to_numpy` undone, as an MLX array of `dtype`."""
    array = mx.array(a)
    return array.view(mx.bfloat16) if dtype == "bfloat16" else array


def _activation_dtype(model) -> mx.Dtype:
    embed = model.model.embed_tokens
    return embed.scales.dtype if hasattr(embed, "scales") else embed.weight.dtype


@dataclass(eq=False)
class _Drawing:
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


def pick_tokens(logprobs: mx.array, temperature: float, min_p: float, key: mx.array) -> mx.array:
    """(rows, vocab) raw log-probs -> (rows,) drawn ids: tokens below min_p times the top
    token's probability are dropped, the rest drawn at `temperature` (0: the top token)."""
    if temperature == 0:
        return mx.argmax(logprobs, axis=-1)
    if min_p > 0:
        floor = mx.max(logprobs, axis=-1, keepdims=True) + math.log(min_p)
        logprobs = mx.where(logprobs >= floor, logprobs, -mx.inf)
    return mx.random.categorical(logprobs / temperature, axis=-1, key=key)
