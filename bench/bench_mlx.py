"""The MLX backend's fragment tree against the patterns it replaces, side by side.

For each starting story, the same search (same parameters, so the same tree) runs on:
  tree      our backend: KV fragments, one batched forward per depth;
  unbatched the same fragment tree, but one forward per beam (no batching);
  no-cache  every beam's whole context run from scratch, one by one (no KV reuse);
then an accept-and-search-again round on the tree backend. Prints tokens evaluated,
forward calls, wall time and the ratios, plus KV bytes held by fragments against one
full cache copy per beam (how a cache-per-beam design would hold them).

Then long stories (bench/long_story.txt, ~1,300 tokens, repeated to 4,352), on our
attention (`backends.mlx.attention`: BLAS matmuls, numpy's softmax, the story read once for
all rows) against mlx-lm's own attention (the rest of the forward is the same on both:
`backends.mlx.swiglu` replaces the model module's SwiGLU for every forward in the process),
side by side, medians of a few repeats: the cost of a 256-token chunk by position and its
ratio to position 0; the first read of a 2,304-token story (the issue's figure) in the
configured chunks and with each prefill chunk size; the same search (its very requests,
recorded once) after 100 vs 2,000 story tokens (story cached); four searches on four
stories at once vs the slowest alone (the same four, recorded and replayed); the two
searches' ratios as the median of five pairs run back to back, with their range. Beside
each ratio, the ratio of the floating-point operations the two sides must do (exact
attention reads every key for every query): what an implementation bound by arithmetic
shows; one bound by reading the weights or by fixed costs per forward (a search's few
rows at a time) shows less. PyTorch's figures on the same weights and ids where an
interpreter with torch and transformers exists (the vLLM test environment); otherwise
it says they were skipped.

    .venv/bin/python bench/bench_mlx.py          (everything)
    .venv/bin/python bench/bench_mlx.py long     (the long-story figures only)
    .venv/bin/python bench/bench_mlx.py patterns (the starting stories' figures only: a
                                                  few minutes, for before/after runs)
    .venv/bin/python bench/bench_mlx.py models   (Qwen2.5-shaped models, float32 vs 8-/4-bit:
                                                  `bench.bench_mlx_models`)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LONG_STORY = Path(__file__).with_name("long_story.txt")  # ~1,300 tokens of plain prose
POSITIONS = (0, 512, 1024, 2048, 4096)
TABLE_CHUNK = 256  # the chunk whose cost by position the table prints (issue #12's measure)
FIRST_READ = 2304
CHUNK_SIZES = (128, 256, 512, 1024)
SEARCH_AFTER = (100, 2000)
REPEATS = 3
SEARCH_REPEATS = 5  # searches take under a second and swing most: more runs, and their spread

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends import create_backend  # noqa: E402
from backends.base import Backend, Candidate  # noqa: E402
from backends.embedded import ensure_embedded_model  # noqa: E402
from backends.mlx.backend import MLXBackend  # noqa: E402
from backends.mlx.head import PLAIN_HEADS  # noqa: E402
from bench.bench_mlx_models import models  # noqa: E402
from tests.vllm_server import vllm_python  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.beams import expand  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402
import mlx.core as mx  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402
# isort: on


class Wrapped(Backend):
    """Another way of asking the same MLX model (its tokens, its weights)."""

    def __init__(self, inner: MLXBackend):
        super().__init__()
        self.inner = inner
        self.special_token_ids = inner.special_token_ids

    model_name = property(lambda self: self.inner.model_name)
    tokenize = property(lambda self: self.inner.tokenize)
    detokenize = property(lambda self: self.inner.detokenize)


class Unbatched(Wrapped):
    """The fragment-tree backend asked one context at a time."""

    name = "unbatched"

    def top_logprobs(self, contexts, k):
        out = []
        for ctx in contexts:
            out += self.inner.top_logprobs([ctx], k)
        self.stats.add(**(self.inner.stats.snapshot() - self.stats.snapshot()).__dict__)
        return out


class NoCache(Wrapped):
    """Every context run whole, one by one: what a cacheless client pays."""

    name = "no-cache"

    def top_logprobs(self, contexts, k):
        out = []
        for ctx in contexts:
            out.append(self.inner._worker.submit(self._one, ctx, k).result())
            self.stats.add(forward_calls=1, model_tokens=len(ctx))
        return out

    def _one(self, ctx: list[int], k: int) -> list[Candidate]:
        logits = self.inner.model(mx.array([ctx]))[0, -1].astype(mx.float32)
        logprobs = logits - mx.logsumexp(logits)
        order = mx.argsort(-logprobs)[:k]
        return self.inner.net.candidates(order.tolist(), logprobs[order].tolist())


class Recorder(Wrapped):
    """The backend, with every request a search makes written down to replay."""

    name = "recorder"

    def __init__(self, inner: MLXBackend):
        super().__init__(inner)
        self.requests: list[tuple[list[list[int]], int]] = []

    def top_logprobs(self, contexts, k):
        self.requests.append((contexts, k))
        return self.inner.top_logprobs(contexts, k)


class Flops:
    """The floating-point operations a forward does, from the model's shape: every
    layer's weights once per token, the vocabulary head once per row, and exact
    attention (scores and weighted values) once per query-key pair."""

    def __init__(self, backend: MLXBackend):
        model = backend.model
        args = model.args
        params = sum(v.size for k, v in tree_flatten(model.parameters()) if "embed" not in k)
        self.per_token = 2 * params
        self.head = 2 * args.vocab_size * args.hidden_size
        head_dim = getattr(args, "head_dim", None) or args.hidden_size // args.num_attention_heads
        self.per_pair = 4 * args.num_attention_heads * head_dim * args.num_hidden_layers
        self.heads_per_row = 1 if type(model).__module__ in PLAIN_HEADS else None

    def forward(self, rows: int, new: int, keys: int) -> float:
        """`rows` rows of `new` tokens each, attending to `keys` keys (theirs included)."""
        heads = self.heads_per_row or new
        return rows * (new * self.per_token + heads * self.head + new * keys * self.per_pair)

    def requests(self, requests, prefix: int) -> float:
        """A search's requests (each a depth: contexts of one new token) after `prefix`
        more story tokens."""
        return sum(
            self.forward(len(contexts), 1, prefix + len(contexts[0])) for contexts, _ in requests
        )


def run(backend: Backend, ids: list[int], params: SearchParams):
    started = time.perf_counter()
    result = expand(backend, ids, params)
    return result, time.perf_counter() - started


def main() -> None:
    # every figure here is of reading: none may come from a story kept on disk by a run before
    settings = load_settings(env={**os.environ, "LLOOM_KV_DISK_MB": "0"})
    if sys.argv[1:] == ["models"]:
        path = ensure_embedded_model(settings.cache_dir)
        return models(settings.cache_dir / "bench-models", tokenizer=path)
    if sys.argv[1:] != ["long"]:
        _patterns(settings)
    if sys.argv[1:] != ["patterns"]:
        _long_stories(settings)


def _patterns(settings) -> None:
    tree = create_backend(settings)
    params = settings.search_for(tree.model_name)
    print(f"model {tree.model_name}; {params}")
    header = f"{'story':<22}{'pattern':<11}{'sugg':>5}{'calls':>7}{'tokens':>8}{'seconds':>9}"
    print(header)
    totals: dict[str, list[float]] = {}
    for text in settings.starting_stories:
        ids = tree.tokenize(text)
        rows = {}
        for name, backend in (
            ("tree", tree),
            ("unbatched", Unbatched(create_backend(settings))),
            ("no-cache", NoCache(tree)),
        ):
            result, seconds = run(backend, ids, params)
            st = result.stats
            rows[name] = (result, seconds)
            totals.setdefault(name, [0, 0, 0.0])
            totals[name][0] += st.forward_calls
            totals[name][1] += st.model_tokens
            totals[name][2] += seconds
            label = text[:20]
            print(
                f"{label:<22}{name:<11}{len(result.suggestions):>5}{st.forward_calls:>7}"
                f"{st.model_tokens:>8}{seconds:>9.2f}"
            )
        same = [s.text for s in rows["tree"][0].suggestions] == [
            s.text for s in rows["no-cache"][0].suggestions
        ]
        print(f"{'':<22}same suggestions on every pattern: {same}")
        _accept_round(tree, text, rows["tree"][0], params)
        _memory(tree, ids, rows["tree"][0])
    t, u, n = totals["tree"], totals["unbatched"], totals["no-cache"]
    print(
        f"\nratios over all stories: tree is {u[2] / t[2]:.1f}x faster than unbatched "
        f"({u[0] / t[0]:.1f}x fewer forwards), {n[2] / t[2]:.1f}x faster than no-cache "
        f"({n[1] / t[1]:.1f}x fewer model tokens)"
    )


def _long_stories(settings) -> None:
    """Long-story figures, our attention against mlx-lm's, side by side in one run."""
    path = ensure_embedded_model(settings.cache_dir)
    chunk = settings.mlx.prefill_chunk
    backends = {
        "ours": create_backend(settings),
        "mlx-lm": MLXBackend(path, prefill_chunk=chunk, rows_attention=False),
    }
    text = LONG_STORY.read_text()
    story = backends["ours"].tokenize(text)
    ids = (story * (2 + POSITIONS[-1] // len(story)))[: POSITIONS[-1] + TABLE_CHUNK]
    params = settings.search_for(backends["ours"].model_name)
    print(
        f"\nlong stories: {TABLE_CHUNK}-token chunks by position, reads in {chunk}-token "
        f"chunks, medians of {REPEATS} runs",
        flush=True,
    )
    costs = {name: _chunk_costs(b, ids, TABLE_CHUNK) for name, b in backends.items()}
    torch = _torch_figures(path, ids, chunk)
    if torch is not None:
        costs["torch"] = torch[0]
    flops = Flops(backends["ours"])
    work = {p: flops.forward(1, TABLE_CHUNK, p + TABLE_CHUNK) for p in POSITIONS}
    print(f"{'chunk at':<16}" + "".join(f"{p:>8}" for p in POSITIONS) + "   ratio 2,048/0")
    for name, cost in costs.items():
        cells = "".join(f"{cost[p]:>8.2f}" for p in POSITIONS)
        ratios = f"{cost[2048] / cost[0]:.2f}x ({cost[4096] / cost[0]:.2f}x at 4,096)"
        print(f"{name:<16}{cells}   {ratios}", flush=True)
    cells = "".join(f"{work[p] / 1e9:>8.1f}" for p in POSITIONS)
    print(
        f"{'GFLOP':<16}{cells}   {work[2048] / work[0]:.2f}x ({work[4096] / work[0]:.2f}x at 4,096)"
    )
    if torch is None:
        print("torch: skipped (no interpreter with torch and transformers; the vLLM env has one)")
    else:
        print(f"first read of {FIRST_READ:,} tokens, torch: {torch[1]:.2f} s")
    for name, b in backends.items():
        seconds = _first_read(b, ids[:FIRST_READ])
        print(f"first read of {FIRST_READ:,} tokens, {name}: {seconds:.2f} s", flush=True)
    for size in CHUNK_SIZES:
        sized = MLXBackend(path, prefill_chunk=size)
        seconds = _first_read(sized, ids[:FIRST_READ])
        print(f"first read of {FIRST_READ:,} tokens, ours, {size}-token chunks: {seconds:.2f} s")
        sized.close()
    recording = MLXBackend(path, prefill_chunk=chunk)
    recorded = _record_searches(recording, ids, params)
    requests = [request for _, requests in recorded for request in requests]
    work = [flops.requests(requests, n - SEARCH_AFTER[0]) for n in SEARCH_AFTER]
    rows = sum(len(contexts) for contexts, _ in requests) // SEARCH_REPEATS
    for name, b in backends.items():
        short, long, ratios = _search_by_length(b, ids, recorded)
        print(
            f"the same search ({len(requests) // SEARCH_REPEATS} depths, {rows} rows on average) "
            f"after {SEARCH_AFTER[0]} vs {SEARCH_AFTER[1]:,} story tokens, {name}: "
            f"{short:.2f} s vs {long:.2f} s ({_paired(ratios)}; "
            f"operations {work[1] / work[0]:.2f}x)",
            flush=True,
        )
    _sessions(backends["ours"], recording, ids, params)


def _chunk_costs(backend: MLXBackend, ids: list[int], chunk: int) -> dict[int, float]:
    """Seconds to read `chunk` new tokens after each position, the position's KV cached."""
    backend.tree.clear()
    backend.top_logprobs([ids[: POSITIONS[-1]]], 1)
    seconds: dict[int, list[float]] = {p: [] for p in POSITIONS}
    for repeat in range(REPEATS):
        for p in POSITIONS:
            context = ids[:p] + _fresh_tail(backend, ids, p, chunk, repeat)
            started = time.perf_counter()
            backend.top_logprobs([context], 1)
            seconds[p].append(time.perf_counter() - started)
    return {p: statistics.median(v) for p, v in seconds.items()}


def _fresh_tail(backend: MLXBackend, ids: list[int], at: int, chunk: int, seed: int) -> list[int]:
    """`chunk` tokens of the story, reversed, that the tree does not hold after ids[:at]."""
    for shift in range(seed * 31, len(ids)):
        tail = ids[shift : shift + chunk][::-1]
        if backend.tree.match(ids[:at] + tail).length == at:
            return tail
    raise RuntimeError("no fresh tail")


def _first_read(backend: MLXBackend, ids: list[int]) -> float:
    seconds = []
    for _ in range(REPEATS):
        backend.tree.clear()
        started = time.perf_counter()
        backend.top_logprobs([ids], 1)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def _record_searches(backend: MLXBackend, ids: list[int], params) -> list[tuple[int, list]]:
    """For each repeat, where its 100-token story ends and the requests its search made
    (on a backend of its own, so the measured ones find nothing of the tree cached)."""
    recorded = []
    for repeat in range(SEARCH_REPEATS):
        end = max(SEARCH_AFTER) + 7 * repeat  # a different ending each repeat
        story = ids[end - SEARCH_AFTER[0] : end]
        recorded.append((end, _requests_of(backend, story, params)))
    return recorded


def _search_by_length(
    backend: MLXBackend, ids: list[int], recorded
) -> tuple[float, float, list[float]]:
    """The same search after a short and a long story ending in the same 100 tokens, each
    story read but for its last token: the recorded requests, replayed with the longer
    story's extra tokens before every context, so both sides run the very same tree.
    Median seconds for each length, and each run's ratio (long over short)."""
    seconds: dict[int, list[float]] = {n: [] for n in SEARCH_AFTER}
    short = SEARCH_AFTER[0]
    for end, requests in recorded:
        for n in SEARCH_AFTER:
            prefix = ids[end - n : end - short]
            backend.top_logprobs([ids[end - n : end - 1]], 1)
            seconds[n].append(_timed_replay(backend, requests, prefix))
    shorts, longs = (seconds[n] for n in SEARCH_AFTER)
    ratios = [b / a for a, b in zip(shorts, longs, strict=True)]
    return statistics.median(shorts), statistics.median(longs), ratios


def _sessions(backend: MLXBackend, recording: MLXBackend, ids: list[int], params) -> None:
    """Four writers on four stories: each one's search alone, then all four at once, the
    very same searches (recorded once on another backend, then replayed: a replay asks
    what its search asked, depth after depth, as the search would)."""
    stories = [ids[start : start + 400] for start in (0, 700, 1400, 2100)]
    flops = Flops(backend)
    alone, together, operations = [], [], []
    for repeat in range(SEARCH_REPEATS):
        cut = 2 * repeat + 1  # fresh contexts: not answered from the last run's cache
        searches = [_requests_of(recording, story[:-cut], params) for story in stories]
        work = [flops.requests(requests, 0) for requests in searches]
        operations.append(sum(work) / max(work))
        _read(backend, [story[: -cut - 1] for story in stories])
        alone.append(max(_timed_replay(backend, requests) for requests in searches))
        _read(backend, [story[: -cut - 1] for story in stories])
        threads = [threading.Thread(target=_replay, args=(backend, r)) for r in searches]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        together.append(time.perf_counter() - started)
    slowest, once = statistics.median(alone), statistics.median(together)
    ratios = [t / a for a, t in zip(alone, together, strict=True)]
    print(
        f"four searches at once {once:.2f} s vs the slowest alone {slowest:.2f} s "
        f"({_paired(ratios)}; "
        f"operations {statistics.median(operations):.2f}x)",
        flush=True,
    )


def _paired(ratios: list[float]) -> str:
    """Ratios of runs taken in pairs, back to back: their median, and their range (the
    machine's speed drifts between pairs more than within one)."""
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}x"
    return f"{statistics.median(ratios):.2f}x, {len(ratios)} pairs {spread}"


def _read(backend: MLXBackend, stories: list[list[int]]) -> None:
    """A tree holding these stories and nothing else."""
    backend.tree.clear()
    for story in stories:
        backend.top_logprobs([story], 1)


def _requests_of(backend: MLXBackend, story: list[int], params) -> list:
    """The requests a search of `story` makes, in order (run on `backend`)."""
    recorder = Recorder(backend)
    expand(recorder, story, params)
    return recorder.requests


def _replay(backend: MLXBackend, requests, prefix: Sequence[int] = ()) -> None:
    for contexts, k in requests:
        backend.top_logprobs([list(prefix) + c for c in contexts], k)


def _timed_replay(backend: MLXBackend, requests, prefix: Sequence[int] = ()) -> float:
    started = time.perf_counter()
    _replay(backend, requests, prefix)
    return time.perf_counter() - started


def _torch_figures(model: Path, ids: list[int], read_chunk: int):
    """(`TABLE_CHUNK`'s cost by position, the first read in `read_chunk`-token chunks)
    from PyTorch on the same weights, or None."""
    python = vllm_python()
    if python is None:
        return None
    job = {
        "model": str(model),
        "ids": ids,
        "chunk": TABLE_CHUNK,
        "read_chunk": read_chunk,
        "positions": POSITIONS,
        "first_read": FIRST_READ,
        "repeats": REPEATS,
    }
    script = Path(__file__).with_name("torch_reference.py")
    done = subprocess.run(
        [str(python), str(script)], input=json.dumps(job), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"torch reference failed: {done.stderr.strip()[-300:]}")
    figures = json.loads(done.stdout)
    return {int(p): s for p, s in figures["chunk"].items()}, figures["first_read"]


def _accept_round(backend: Backend, text: str, result, params: SearchParams) -> None:
    beam = next(s for s in result.suggestions if s.exact).token_ids  # the beam's own ids
    accepted = backend.tokenize(text) + list(beam)
    again, seconds = run(backend, accepted, params)
    print(
        f"{'':<22}after accept: {again.stats.prefill_tokens} prefill tokens, "
        f"{again.stats.forward_calls} forwards, {seconds:.2f} s"
    )


def _memory(backend: MLXBackend, ids: list[int], result) -> None:
    """Fragment bytes for this story's tree against one full KV copy per beam."""
    per_token = _bytes_per_token(backend)
    beams = result.tree.leaves()
    copies = sum((len(ids) + len(leaf.token_ids())) * per_token for leaf in beams)
    nodes = _count_tree_tokens(result.tree)
    fragments = (len(ids) + nodes) * per_token
    print(
        f"{'':<22}KV held: fragments {fragments / 2**20:.1f} MiB vs a copy per beam "
        f"{copies / 2**20:.1f} MiB ({copies / fragments:.1f}x)"
    )


def _bytes_per_token(backend: MLXBackend) -> int:
    layers, heads, head_dim = backend.net.kv_shape
    return 2 * layers * heads * head_dim * backend.net.dtype.size


def _count_tree_tokens(node) -> int:
    return sum(1 + _count_tree_tokens(child) for child in node.children)


if __name__ == "__main__":
    main()
