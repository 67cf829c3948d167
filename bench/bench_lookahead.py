"""What look-ahead costs another writer on the same backend, and the server it runs on.

Writer A's suggestions are shown and A's look-ahead starts (3 rows, `weave.desk.lookahead`);
a moment later writer B searches another story. B's search while A's look-ahead runs is
timed against the same search with no look-ahead, the two interleaved round by round,
medians side by side (issue 25's target on MLX: at most 1.2x). Also printed: the model
tokens look-ahead spends per node shown against the writer's one search there, which is
what it costs a server shared by many writers.

  mlx       the local backend, a fresh one for every search (its fragment tree would
            answer a repeated search from cache): both sides read B's story and grow
            the same tree; writers' requests come first (`backends.mlx.batching`).
  llamacpp  a real llama-server (4 slots), one for all rounds, each search warm (run
            once before): a server serves requests as they come, look-ahead's among them.
  vllm      a real vLLM server, likewise.

    .venv/bin/python bench/bench_lookahead.py [mlx|llamacpp|vllm] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.base import Backend  # noqa: E402
from tests.background import ended  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.desk.lookahead import LookAhead  # noqa: E402
from weave.search.beams import expand  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402

ROWS = 3
HEAD_START_S = 0.3  # B asks this long after A's look-ahead began: mid-search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", nargs="?", choices=("mlx", "llamacpp", "vllm"), default="mlx")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    settings = load_settings(env={})
    story_a, story_b = settings.starting_stories[:2]
    with backends(args.backend, settings) as make:
        probe = make()
        params = replace(settings.search_for(probe.model_name), max_suggestions=25)
        print(f"{args.backend}: {probe.model_name}; {params}")
        cost(probe, story_a, params)
        times: dict[str, list[float]] = {"alone": [], "during": []}
        for _ in range(args.rounds):
            for side in times:
                times[side].append(b_search(make, story_a, story_b, params, side == "during"))
        alone, during = (statistics.median(times[k]) for k in ("alone", "during"))
        print(f"B's search alone: median {alone:.2f} s  {spread(times['alone'])}")
        print(f"B's search while A's look-ahead runs: median {during:.2f} s  "
              f"{spread(times['during'])}")  # fmt: skip
        print(f"during / alone: {during / alone:.2f}x (target on MLX: <= 1.2x)")


def spread(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.2f}" for v in values) + ")"


def cost(backend: Backend, story: str, params: SearchParams) -> None:
    """Model tokens of the writer's search at `story` against look-ahead's there."""
    ids = backend.tokenize(story)
    shown = expand(backend, ids, params)
    ahead = LookAhead(ROWS)
    before = time.perf_counter()
    ahead.start(backend, ids, shown.suggestions, params)
    ended(ahead)
    seconds = time.perf_counter() - before
    plans = ahead.plans(backend.model_name, ids, shown.suggestions, params)
    results = [ahead.take(backend.model_name, plan.context, params) for plan in plans]
    tokens = sum(r.stats.model_tokens for r in results if r is not None)
    print(f"the writer's search: {shown.stats.model_tokens} model tokens, "
          f"{shown.stats.seconds:.2f} s; look-ahead ({ROWS} rows): {tokens} model tokens "
          f"({tokens / max(shown.stats.model_tokens, 1):.1f}x), {seconds:.2f} s")  # fmt: skip


def b_search(make: Callable[[], Backend], story_a, story_b, params, during: bool) -> float:
    """Seconds of writer B's search at `story_b`, with writer A's look-ahead running or not."""
    backend = make()
    ids_a, ids_b = backend.tokenize(story_a), backend.tokenize(story_b)
    shown = expand(backend, ids_a, params)
    ahead = LookAhead(ROWS)
    if during:
        ahead.start(backend, ids_a, shown.suggestions, params)
        time.sleep(HEAD_START_S)
        assert ahead.running(), "look-ahead ended before B asked: nothing measured"
    started = time.perf_counter()
    expand(backend, ids_b, params)
    seconds = time.perf_counter() - started
    ahead.cancel()
    ended(ahead)
    return seconds


@contextmanager
def backends(name: str, settings) -> Iterator[Callable[[], Backend]]:
    """A maker of backends: a fresh MLX backend each time, or clients of one server
    whose every search is made once before (warm)."""
    if name == "mlx":
        from backends import create_backend

        made: list[Backend] = []

        def fresh() -> Backend:
            if made:
                made.pop().close()
            made.append(create_backend(replace(settings, backend="mlx")))
            return made[-1]

        try:
            yield fresh
        finally:
            for backend in made:
                backend.close()
        return
    with tempfile.TemporaryDirectory() as tmp, server(name, settings, Path(tmp)) as make:
        yield make


@contextmanager
def server(name: str, settings, tmp: Path) -> Iterator[Callable[[], Backend]]:
    if name == "llamacpp":
        from backends.llamacpp import LlamaCppBackend
        from tests.llama_server import llama_server

        with llama_server(tmp / "log") as url:
            yield lambda: warm(LlamaCppBackend(url), settings)
        return
    from backends.embedded import ensure_embedded_model
    from backends.vllm import VLLMBackend
    from tests.vllm_server import vllm_server

    with vllm_server(ensure_embedded_model(settings.cache_dir), tmp / "log") as url:
        yield lambda: warm(VLLMBackend(url), settings)


def warm(backend: Backend, settings) -> Backend:
    """`backend` after searching each story once, so that both sides find the server's
    caches alike."""
    params = replace(settings.search_for(backend.model_name), max_suggestions=25)
    for story in settings.starting_stories[:2]:
        expand(backend, backend.tokenize(story), params)
    return backend


if __name__ == "__main__":
    main()
