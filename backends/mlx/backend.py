"""The local backend: an mlx-lm model in this process, as the `Backend` the search asks.

`MLXBackend` is the adapter: it loads the model (`backends.mlx.loading`, `weights`), says
what it is, turns text into tokens and back, and runs every MLX job on one worker thread
of its own (`backends.mlx.worker`), so MLX arrays stay on the thread (and stream) that
made them. A search's depths are queued with the depths other page sessions ask at about
the same time and joined into one forward there (`backends.mlx.batching`); a `cancellable`
or `background` block (`worker.Callers`) says, per calling thread, when to stop and whose
request waits. The forwards themselves are `backends.mlx.forward`'s: each context's KV is
assembled from the fragment tree (`backends.mlx.kv_tree`), only the tokens the tree lacks
are run, a depth's contexts run as one batched forward, and longer tails (a new or edited
story) are prefilled in chunks (`read_ahead` runs them one worker call each, so a page
can show how far a long story has been read). Accepting a suggestion appends ids whose KV
the tree already holds, so it costs no prefill. Sampling for ramify is
`backends.mlx.sampling`'s; the alternatives at a text's tokens `backends.mlx.alternatives`'.

On a CPU the model reads at most `CPU_READ_WINDOW` tokens of a context's end by default
(`read_window`): reading runs at a few hundred tokens a second there, and a window of
that size opens a long story in seconds. A context read at length is kept on disk
(`backends.mlx.kv_disk`, `kv_keep`, when the backend is given a folder) and a later
backend, after a restart, takes its KV from there instead of reading it again.

Owns: the backend's parts and their wiring, its facts and its tokens. Does not own: the
search, the forwards, sampling.
"""

from __future__ import annotations

import ctypes
import logging
import secrets
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import mlx.core as mx

from backends.base import Backend, Cancelled, Candidate, Continuation, TokenAlternatives
from backends.errors import BackendError
from backends.mlx.alternatives import token_alternatives
from backends.mlx.attention import install
from backends.mlx.batching import Batcher, Forward, usage_of
from backends.mlx.forward import Asked, Context, Net, answer
from backends.mlx.kv_disk import DiskKV, model_fingerprint
from backends.mlx.kv_keep import restore, unread
from backends.mlx.kv_tree import FragmentTree
from backends.mlx.loading import load_checked
from backends.mlx.sampling import Draw, draw
from backends.mlx.swiglu import install as install_swiglu
from backends.mlx.tokens import token_pieces
from backends.mlx.weights import ModelInfo, prepare
from backends.mlx.worker import Callers, MLXWorker

log = logging.getLogger(__name__)

# The most tokens of a story's end the model reads on a CPU unless told otherwise. On two
# loaded cores the embedded model read 1,024 tokens in 6.2 s (load ~4) and 2,048 in 12.8 s,
# a search taking 2.5-3 s more: 1,024 keeps a first open with its search near 10 s on a
# busy machine and well under it on a quiet one (bench/bench_long.py).
CPU_READ_WINDOW = 1024


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
        self._batcher = Batcher(self._worker.submit, self._call, batch_window)
        self._callers = Callers()
        pieces = token_pieces(self.tokenizer)
        self.special_token_ids = frozenset(self.tokenizer.all_special_ids)
        self._context_length = loaded.config.get("max_position_embeddings")
        # ids the model embeds and the tokenizer names: any other id is refused
        self.vocab_size = min(len(pieces), self.model.model.embed_tokens.weight.shape[0])
        # Our attention ignores the model's masks: a model whose layers attend within a
        # window keeps mlx-lm's, which reads the window from the batch cache's mask.
        rows = rows_attention and not loaded.sliding and install(self.model)
        install_swiglu(self.model)  # module-wide: every forward of this architecture
        self.net = Net.of(self.model, pieces, rows_attention=rows)
        if read_window is None and mx.default_device() == mx.cpu:
            read_window = CPU_READ_WINDOW
        self._read_window = read_window or None
        self._disk = None
        if kv_disk is not None and kv_disk_bytes > 0:
            kv = (self.net.kv_shape, str(self.net.dtype))
            fingerprint = model_fingerprint(self.model_path, *kv)
            self._disk = DiskKV(Path(kv_disk).expanduser(), fingerprint, kv_disk_bytes)

    # -- facts -----------------------------------------------------------------------
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
        return self.net.vocab

    @property
    def read_window(self) -> int | None:
        """The model's window, or `read_window` tokens where that is less (see __init__)."""
        if self._read_window is None or self._context_length is None:
            return self._read_window or self._context_length
        return min(self._read_window, self._context_length)

    @property
    def cache_bytes(self) -> int:
        """Bytes of KV the fragment tree holds now (at most `cache_cap_bytes` between calls)."""
        return self.tree.nbytes

    @property
    def cache_cap_bytes(self) -> int:
        return self.tree.max_bytes

    # -- tokens ----------------------------------------------------------------------
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

    # -- the model's answers -----------------------------------------------------------
    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        return self._answers(contexts, k, {})

    def top_logprobs_also(self, contexts, k, also):
        """Exact: the ids are read from the same logits as the top k, in the same forward
        (a context whose top k is cached is run again for its last token where the
        cached candidates lack one of them)."""
        asked: dict[tuple[int, ...], frozenset[int]] = {}
        for context, ids in zip(contexts, also, strict=True):
            self.check_ids(ids)
            if ids:
                asked[tuple(context)] = asked.get(tuple(context), frozenset()) | frozenset(ids)
        return self._answers(contexts, k, asked)

    def _answers(self, contexts, k, asked) -> list[list[Candidate]]:
        if any(not ctx for ctx in contexts):
            raise BackendError("an empty context has no next token", backend=self.name)
        for context in contexts:
            self.check_ids(context)
        callers = self._callers
        request = self._batcher.ask({tuple(c) for c in contexts}, k, callers.wanted,
                                    asked=asked, background=callers.background)  # fmt: skip
        answers, usage = request.result()
        self.stats.add(**usage.__dict__)  # counted on the caller's thread, for its search
        return [answers[tuple(ctx)] for ctx in contexts]

    def unread(self, context: list[int]) -> int:
        """The tokens neither the fragment tree nor the disk holds, when more than one
        chunk (what `read_ahead` reads with progress); else 0."""
        self.check_ids(context)
        left = self._worker.submit(unread, self.tree, self._disk, tuple(context)).result()
        return left if left > self.prefill_chunk else 0

    def read_ahead(self, context: list[int], k: int, report: Callable[[int, int], None]) -> None:
        """Prefill a context one chunk per worker call, reporting after each; the last
        chunk leaves the context's top-k cached for the search's first step. A tail of
        one chunk or less is left to the search: there is no progress to show."""
        self.check_ids(context)
        ids = tuple(context)
        job = (self.tree, self._disk, ids, self.net.candidates)
        done = self._worker.submit(restore, *job).result()
        if len(ids) - done <= self.prefill_chunk:
            return
        wanted = self._callers.wanted
        while done < len(ids):
            if not wanted():
                raise Cancelled(f"reading stopped after {done} of {len(ids)} tokens")
            done = min(done + self.prefill_chunk, len(ids))
            # only the whole context is kept on disk, not each chunk on the way to it
            job = ({ids[:done]}, k, {}, False, done == len(ids))
            _, forwards = self._worker.submit(self._call, *job).result()
            self.stats.add(**usage_of(forwards).__dict__)
            report(done, len(ids))

    def alternatives(
        self, ids: list[int], k: int, *, start: int = 1
    ) -> list[TokenAlternatives] | None:
        """The cached KV before `start`, then one forward over the rest reading every
        position (`backends.mlx.alternatives`)."""
        self.check_ids(ids)
        job = (self.model, self.tree, self.net.pieces, list(ids), k, start, self.prefill_chunk)
        rows, usage = self._worker.submit(token_alternatives, *job).result()
        self.stats.add(**usage.__dict__)
        return rows

    def sample(self, context, *, n, temperature, min_p, max_tokens, seed=None):
        """All n samples in one batched run on the worker (`backends.mlx.sampling`), each
        sample's KV filed in the tree, so that accepting a sample and searching on from it
        costs no prefill."""
        if not context:
            raise BackendError("an empty context has no next token", backend=self.name)
        self.check_ids(context)
        seed = secrets.randbits(31) if seed is None else seed
        how = Draw(n, temperature, min_p, max_tokens, seed)
        parts = dict(special=self.special_token_ids, chunk=self.prefill_chunk, disk=self._disk)
        job = (self.net, self.tree, tuple(context), how)
        drawn, usage = self._worker.submit(partial(draw, *job, **parts)).result()
        self.stats.add(**usage.__dict__)
        return [Continuation(tuple(d.tokens), self.detokenize(d.tokens), d.logprob) for d in drawn]

    def _call(
        self,
        contexts: set[Context],
        k: int,
        asked: Asked,
        background: bool = False,
        keep: bool = True,
    ) -> tuple[dict, list[Forward]]:
        """Answer `contexts` (and the ids `asked` names beside their top k) on the worker
        (`keep`: a context read at length may be kept on disk); the KV a background call
        files is the first the cap drops."""
        ran: list[Forward] = []
        self.tree.ahead = background
        try:
            parts = dict(chunk=self.prefill_chunk, disk=self._disk, keep=keep and not background)
            answers = answer(self.net, self.tree, contexts, k, asked=asked, ran=ran, **parts)
        finally:
            self.tree.ahead = False
        self.tree.evict()
        return answers, ran

    # -- threads -----------------------------------------------------------------------
    def cancellable(self, wanted: Callable[[], bool]):
        """Within this block, this thread's reads and searches stop with `Cancelled`
        between chunks and between depths once wanted() is False (the page session that
        asked is gone or has asked for something else), leaving the model to the others.
        wanted() is also called on the worker thread: it must be cheap and thread-safe."""
        return self._callers.cancellable(wanted)

    def background(self, wanted: Callable[[], bool]):
        """Within this block, this thread's searches are look-ahead's: each depth waits
        for every writer's (`backends.mlx.batching`), stops with `Cancelled` once wanted()
        is False, and the KV it files is the first the cap drops (`backends.mlx.kv_tree`)."""
        return self._callers.in_background(wanted)

    def searching(self):
        """Within this block, this thread's search is a writer's (unless it is look-ahead's,
        in `background`): no look-ahead depth runs until it ends (`backends.mlx.batching`)."""
        return nullcontext() if self._callers.background else self._batcher.searching()

    def close(self) -> None:
        """Let go of the KV and the weights and give their memory back to the system now,
        not once the last holder of this backend lets go of it (a page session still
        searching on a model just switched away from gets the "closed" error)."""
        if not self._worker.stopped:
            self._worker.submit(self._let_go).result()
            self._worker.stop()
        if self._disk is not None:
            self._disk.close()
        give_memory_back()

    def _let_go(self) -> None:
        """On the worker, its last job: the KV, and the model's weights (an mlx `Module`
        is a dict of its parameters and submodules: emptied, it holds none)."""
        self.tree.clear()
        self.model.clear()


def give_memory_back() -> None:
    """Hand freed memory back to the system: MLX's buffer cache and the C heap's free
    pages. glibc keeps what a thread freed in that thread's heap, so without this a
    process that builds backends one after another (a page switching models, a test
    run) grows by about a model each time: freed, but still the process's."""
    mx.clear_cache()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; macOS has none
    if trim is not None:
        trim(0)
