"""`bench/bench_mlx.py models`: the MLX backend on models of real models' shapes, float32
against 8-bit and 4-bit, side by side.

For Qwen2.5-0.5B's and 1.5B's shapes (random weights from mlx-lm's qwen2 class, built
once into ~/.cache/lloom/bench-models; the tokenizer is the embedded model's), each
stored as float32, 8-bit and 4-bit: load time, one search's time (cutoff 0.1, 25
suggestions, empty cache), one forward's time (one row of one token after the cached
story: a search's unit), the weights' bytes as run, and beside each time the least the
bytes allow at the read bandwidth measured here (every weight read once per forward).
Quantized models run as the backend runs them on CPU, dequantized to float32 at load
(`backends.mlx.weights`; first the ways to multiply by one 4-bit layer, which chose
it); for 0.5B they also run kept quantized (`kept`, the budget at 0:
how they ran before). For 0.5B's quantized models, the largest |difference| between the
backend's log-probs and mlx-lm's own forward on mlx-lm's dequantization of the same
folder, over the contexts of the search's suggestions. Searches and forwards are medians
of `REPEATS`, one variant after another: on a loaded machine compare rows with care.
Random weights at mlx-lm's initial scale give flat next-token distributions, so the
search is narrow (few rows a forward): the figures are those of one-row forwards.
"""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path

from backends.mlx.backend import MLXBackend
from tests.mlx_models import QWEN25, VOCAB, build_model
from weave.search.beams import expand
from weave.search.params import SearchParams

# isort: off
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
from mlx_lm import load  # noqa: E402
from mlx_lm.utils import dequantize_model  # noqa: E402
# isort: on

STORY = (
    "The forest seemed darker than usual, but that did not bother Elis in the least. "
    "She had walked this path a hundred times, and she knew"
)
PARAMS = SearchParams(cutoff=0.1, max_suggestions=25)
REPEATS = 3
BUDGET = 16 << 30  # the bench dequantizes every model it builds
VARIANTS = (("float32", None, BUDGET), ("8-bit", 8, BUDGET), ("4-bit", 4, BUDGET))
KEPT = (("8-bit kept", 8, 0), ("4-bit kept", 4, 0))


def models(cache_dir: Path, tokenizer: Path) -> None:
    _layer_ways()
    bandwidth = _bandwidth()
    print(f"read bandwidth (numpy sums a 512 MiB array): {bandwidth / 1e9:.1f} GB/s")
    head = (
        f"{'model':<7}{'weights':<12}{'MiB':>6}{'load s':>8}{'search s':>10}{'least':>7}"
        f"{'fwds':>6}{'fwd ms':>8}{'least':>7}{'vs f32':>8}{'max |dlp|':>11}"
    )
    for shape in ("0.5B", "1.5B"):
        variants = VARIANTS + (KEPT if shape == "0.5B" else ())
        folders = {bits: _folder(cache_dir, shape, bits, tokenizer) for _, bits, _ in variants}
        rows = {}
        for label, bits, budget in variants:
            rows[label] = _measure(
                folders[bits], budget, check=bits is not None and shape == "0.5B"
            )
            gc.collect()
        print(head)
        base = rows["float32"]["search"]
        for label, row in rows.items():
            least = row["bytes"] / bandwidth
            delta = f"{row['delta']:.1e}" if row["delta"] is not None else "-"
            print(
                f"{shape:<7}{label:<12}{row['bytes'] >> 20:>6}{row['load']:>8.1f}"
                f"{row['search']:>10.2f}{least * row['forwards']:>7.2f}{row['forwards']:>6}"
                f"{row['forward'] * 1e3:>8.0f}{least * 1e3:>7.0f}"
                f"{row['search'] / base:>7.2f}x{delta:>11}"
            )


def _layer_ways() -> None:
    """The ways to multiply by a 4-bit layer on CPU (Qwen2.5-0.5B's 896 x 4,864 MLP layer),
    best of 15: float32 weights (what dequantizing at load gives), MLX's quantized matmul,
    and dequantizing on the fly into a fresh array for each multiply, then BLAS."""
    mx.random.seed(0)
    weight = mx.random.normal((4864, 896)) * 0.03
    packed, scales, biases = mx.quantize(weight, 64, 4)
    mx.eval(weight, packed, scales, biases)
    for rows in (1, 8, 32):
        x = mx.random.normal((rows, 896))
        mx.eval(x)
        ways = {
            "float32": lambda x=x: x @ weight.T,
            "4-bit MLX": lambda x=x: mx.quantized_matmul(x, packed, scales, biases, bits=4),
            "dequantize+BLAS": lambda x=x: x @ mx.dequantize(packed, scales, biases, 64, 4).T,
        }
        times = ", ".join(f"{name} {_best(way) * 1e3:.2f} ms" for name, way in ways.items())
        print(f"one 896x4864 layer, {rows:>2} rows: {times}")


def _best(way, repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        mx.eval(way())
        times.append(time.perf_counter() - started)
    return min(times)


def _folder(cache_dir: Path, shape: str, bits: int | None, tokenizer: Path) -> Path:
    folder = cache_dir / f"qwen2.5-{shape}-shaped-{bits or 32}bit"
    if not (folder / "model.safetensors").exists():
        build_model(folder, "qwen2", QWEN25[shape], tokenizer_from=tokenizer, bits=bits)
    return folder


def _measure(folder: Path, budget: int, check: bool) -> dict:
    started = time.perf_counter()
    backend = MLXBackend(folder, dequantize_bytes=budget)
    loaded = time.perf_counter() - started
    ids = backend.tokenize(STORY)
    searches, forwards = [], []
    for _ in range(REPEATS):
        backend.tree.clear()
        started = time.perf_counter()
        result = expand(backend, ids, PARAMS)
        searches.append(time.perf_counter() - started)
    for token in range(REPEATS):
        started = time.perf_counter()
        backend.top_logprobs([ids + [100 + token]], 5)  # the story is cached by the search
        forwards.append(time.perf_counter() - started)
    delta = _delta(backend, folder, ids, result) if check else None
    row = {
        "load": loaded,
        "search": statistics.median(searches),
        "forwards": result.stats.forward_calls,
        "forward": statistics.median(forwards),
        "bytes": backend.info.memory_bytes,
        "delta": delta,
    }
    backend.close()
    return row


def _delta(backend: MLXBackend, folder: Path, ids: list[int], result) -> float:
    """The largest |log-prob difference|, top 5 of each suggestion's contexts, between the
    backend and mlx-lm's own forward on mlx-lm's dequantization of the folder."""
    model, _ = load(str(folder))
    dequantize_model(model)
    model.set_dtype(mx.float32)
    worst = 0.0
    for suggestion in result.suggestions[:5]:
        for end in range(len(suggestion.token_ids)):
            context = ids + list(suggestion.token_ids[:end])
            [ours] = backend.top_logprobs([context], 5)
            logits = np.array(model(mx.array([context]))[0, -1].astype(mx.float32), np.float64)
            logits = logits[:VOCAB]  # the backend offers the tokenizer's tokens only
            logprobs = logits - logits.max()
            logprobs -= np.log(np.exp(logprobs).sum())
            worst = max(worst, *(abs(c.logprob - logprobs[c.token_id]) for c in ours))
    return worst


def _bandwidth() -> float:
    """Bytes a second numpy reads summing a 512 MiB float32 array (best of 3)."""
    array = np.ones(128 << 20, np.float32)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        array.sum()
        best = min(best, time.perf_counter() - started)
    return array.nbytes / best
