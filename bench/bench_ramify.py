"""Ramify on the MLX backend: n samples in one batched run against n runs of one row.

For a starting story and the long story (bench/long_story.txt, ~1,300 tokens), each
already read into the fragment tree, draws n samples of max_tokens tokens:
  batched   one `sample` call: n rows over the shared story KV, one forward per step;
  one-by-one  n calls of one row each (what a backend without batching would do);
then accepts the first sample and searches on from it, printing the story tokens that
search had to read again. Prints forwards, tokens evaluated, wall time and the ratios.

    .venv/bin/python bench/bench_ramify.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LONG_STORY = Path(__file__).with_name("long_story.txt")

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends import create_backend  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.ramify import RamifyParams, ramify  # noqa: E402
from weave.search.beams import expand  # noqa: E402
from weave.search.params import SearchParams  # noqa: E402
# isort: on

PARAMS = RamifyParams(n=4, temperature=1.0, min_p=0.1, max_tokens=24, seed=1)


def timed(backend, context, params):
    started = time.perf_counter()
    result = ramify(backend, context, params)
    return result, time.perf_counter() - started


def compare(backend, name: str, story: str) -> None:
    context = backend.tokenize(story)
    backend.top_logprobs([context], 1)  # the story read once, as after a first search
    batched, batched_s = timed(backend, context, PARAMS)
    single = [timed(backend, context, RamifyParams(1, 1.0, 0.1, 24, seed=i)) for i in range(4)]
    single_s = sum(s for _, s in single)
    single_calls = sum(r.stats.forward_calls for r, _ in single)
    single_tokens = sum(r.stats.model_tokens for r, _ in single)
    print(f"{name} ({len(context)} tokens), n={PARAMS.n}, max_tokens={PARAMS.max_tokens}")
    row = "  {:<11} forwards {:>4}  tokens {:>5}  {:>6.2f} s"
    print(row.format("batched", batched.stats.forward_calls, batched.stats.model_tokens, batched_s))
    print(row.format("one-by-one", single_calls, single_tokens, single_s))
    print(f"  one-by-one / batched: {single_s / batched_s:.2f}x the time")
    accepted = context + list(batched.samples[0].token_ids)
    search = expand(backend, accepted, SearchParams(cutoff=0.1, max_depth=4, max_suggestions=8))
    print(f"  accept a sample, then search: {search.stats.prefill_tokens} tokens read again")


def main() -> None:
    settings = load_settings(env={"LLOOM_BACKEND": "mlx"})
    backend = create_backend(settings, env={})
    compare(backend, "starting story", settings.starting_stories[1])
    compare(backend, "long story", LONG_STORY.read_text())
    backend.close()


if __name__ == "__main__":
    main()
