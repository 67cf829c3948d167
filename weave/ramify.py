"""Ramify (n8loom's `ramify`): N continuations of a context drawn by the model's sampling.

Beside threshold splitting (`weave.search`), a writer may ask for N continuations
sampled from the model: at each position the tokens below `min_p` times the top token's
probability are dropped and the rest drawn at `temperature` (0: always the top token),
up to `max_tokens` tokens; a control token ends a sample. The backend draws them
(`Backend.sample`: MLX in one batched run on its fragment tree, the servers with their
own samplers). This module validates the parameters, fits the context to the model's
window, reports progress and returns the samples, in the order drawn, with the run's
stats, as a search does. It does no I/O of its own and knows nothing of pages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from backends.base import Backend, BackendError
from weave.bounds import bounded, check_bounds
from weave.search import Progress, ProgressCallback, SearchStats, fit_context

MAX_SAMPLES = 16
MAX_SAMPLE_TOKENS = 256


@dataclass(frozen=True)
class RamifyParams:
    """The knobs of one ramification. Defaults suit the embedded SmolLM2-135M, tried on
    the three starting stories: at temperature 1.0 with min-p 0.1 its samples stay
    coherent and differ from each other (min-p 0.05 let odd words through at 1.0, and
    cooler draws repeated themselves more); 24 tokens is about a sentence. Each number
    carries its bounds (`weave.bounds`), which the page's sliders read."""

    n: int = bounded(4, 1, MAX_SAMPLES)
    temperature: float = bounded(1.0, 0.0, 2.0)
    min_p: float = bounded(0.1, 0.0, 1.0)
    max_tokens: int = bounded(24, 1, MAX_SAMPLE_TOKENS)
    seed: int | None = bounded(None, 0, 2**31 - 1)  # None: a new draw every time

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass(frozen=True)
class Sample:
    """One drawn continuation: `logprob` is the sum of its tokens' raw log-probabilities;
    `stats` are the whole ramification's (every sample of one run shares them)."""

    token_ids: tuple[int, ...]
    text: str
    logprob: float
    stats: SearchStats


@dataclass(frozen=True)
class RamifyResult:
    samples: list[Sample]
    stats: SearchStats
    context_ids: tuple[int, ...]  # the context sampled from (the story's end if too long)


def ramify(
    backend: Backend,
    context: list[int],
    params: RamifyParams,
    progress: ProgressCallback | None = None,
) -> RamifyResult:
    """Draw `params.n` continuations of `context`.

    `progress` hears of a long story being read (depth 0) and of the finished draw.
    Raises ValueError for an empty context and lets `BackendError` through untouched
    (a backend that cannot sample, whose `sample` answers None, raises one here).
    """
    if not context:
        raise ValueError("The story is empty: write a few words first.")
    fitted = fit_context(context, backend.read_window, params.max_tokens)
    started, usage_before = time.perf_counter(), backend.stats.snapshot()

    def report(depth: int, done: int, latest: str = "", read: int = 0, tokens: int = 0):
        progress(
            Progress(
                depth=depth,
                beams_done=done,
                beams_live=0,
                tokens_evaluated=(backend.stats.snapshot() - usage_before).model_tokens,
                seconds=time.perf_counter() - started,
                latest=latest,
                story_read=read,
                story_tokens=tokens,
            )
        )

    if progress is not None:
        backend.read_ahead(fitted, 1, lambda read, tokens: report(0, 0, read=read, tokens=tokens))
    drawn = backend.sample(
        fitted,
        n=params.n,
        temperature=params.temperature,
        min_p=params.min_p,
        max_tokens=params.max_tokens,
        seed=params.seed,
    )
    if drawn is None:
        raise BackendError("this backend cannot sample continuations", backend=backend.name)
    stats = SearchStats.of(
        backend, backend.stats.snapshot() - usage_before, time.perf_counter() - started
    )
    samples = [Sample(d.token_ids, d.text, d.logprob, stats) for d in drawn]
    if progress is not None:
        longest = max((len(s.token_ids) for s in samples), default=0)
        report(longest, len(samples), samples[0].text if samples else "")
    return RamifyResult(samples=samples, stats=stats, context_ids=tuple(fitted))
